// Proving that both ends of a connection belong to the same job, without sending the job's secret.
//
// Challenge-response with HMAC-SHA256 (OpenSSL's libcrypto): the accepting side sends a fresh random
// nonce; the connecting side answers with a nonce of its own and a proof, HMAC(secret, "client" |
// accepting nonce | connecting nonce); the accepting side checks it and proves itself the same way with
// the label "server". Nonces are fresh per connection, so a recorded proof is worth nothing later; the
// labels keep one side's proof from passing as the other's.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "cc/common/status.h"

namespace bps {

constexpr size_t kNonceBytes = 32;
constexpr size_t kProofBytes = 32;  // SHA-256
using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

enum class Side { kClient, kServer };

// Fresh random bytes from the kernel.
Nonce FreshNonce();

class JobSecret {
 public:
  // An error (naming BYTEPS_JOB_SECRET, never showing the secret) when it is shorter than
  // kMinJobSecretBytes (config.h).
  static StatusOr<JobSecret> From(const std::string& secret);

  // What `side` sends to prove it holds the secret, for the two nonces of a connection.
  Proof Prove(Side side, const Nonce& server_nonce, const Nonce& client_nonce) const;
  // Whether `proof` is that (compared in constant time).
  bool Verify(Side side, const Nonce& server_nonce, const Nonce& client_nonce, const Proof& proof) const;

  JobSecret() = default;

 private:
  explicit JobSecret(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

}  // namespace bps
