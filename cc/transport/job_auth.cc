#include "cc/transport/job_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "cc/common/config.h"
#include "cc/common/tokens.h"

namespace bps {

Nonce FreshNonce() {
  Nonce nonce;
  FillRandom(nonce.data(), nonce.size());
  return nonce;
}

StatusOr<JobSecret> JobSecret::From(const std::string& secret) {
  if (secret.size() < kMinJobSecretBytes) {
    return InvalidArgument("the job secret (BYTEPS_JOB_SECRET or BYTEPS_JOB_SECRET_FILE) has " +
                           std::to_string(secret.size()) + " bytes; use at least " + std::to_string(kMinJobSecretBytes) +
                           " random ones, the same on every process of the job (e.g. `openssl rand -hex 32`)");
  }
  return JobSecret(secret);
}

Proof JobSecret::Prove(Side side, const Nonce& server_nonce, const Nonce& client_nonce) const {
  std::string message = side == Side::kClient ? "bps_tf client" : "bps_tf server";
  message.append(reinterpret_cast<const char*>(server_nonce.data()), server_nonce.size());
  message.append(reinterpret_cast<const char*>(client_nonce.data()), client_nonce.size());
  Proof proof{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), proof.data(), &length) == nullptr ||
      length != proof.size()) {
    DieBecause("HMAC-SHA256 failed in libcrypto");
  }
  return proof;
}

bool JobSecret::Verify(Side side, const Nonce& server_nonce, const Nonce& client_nonce, const Proof& proof) const {
  if (key_.empty()) return false;
  Proof expected = Prove(side, server_nonce, client_nonce);
  return CRYPTO_memcmp(expected.data(), proof.data(), proof.size()) == 0;
}

}  // namespace bps
