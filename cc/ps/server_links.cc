#include "cc/ps/server_links.h"

#include <algorithm>

#include "cc/common/clock.h"
#include "cc/ps/message.h"
#include "cc/ps/node_setup.h"
#include "cc/transport/address.h"

namespace bps {

Status ServerLinks::Connect(const std::vector<std::string>& addresses) {
  std::vector<PeerId> peers;
  for (const std::string& address : addresses) {
    std::optional<PeerId> kept;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < addresses_.size() && i < peers_.size(); ++i) {
        if (addresses_[i] == address && !lost_[i]) kept = peers_[i];
      }
    }
    if (kept) {
      peers.push_back(*kept);
      continue;
    }
    auto peer = transport_->Connect(address, config_.timeout_s, Link::kData);
    if (!peer.ok()) return Status(peer.status().code(), "cannot reach a server: " + peer.status().message());
    peers.push_back(peer.value());
  }
  auto mine = AdvertisedHost(config_);
  std::lock_guard<std::mutex> lock(mu_);
  for (PeerId old : peers_) {
    if (std::find(peers.begin(), peers.end(), old) == peers.end()) retired_.insert(old);
  }
  addresses_ = addresses;
  peers_ = std::move(peers);
  lost_.assign(peers_.size(), false);
  on_this_host_.clear();
  for (const std::string& address : addresses) {
    auto theirs = ParseHostPort(address);
    on_this_host_.push_back(mine.ok() && theirs.ok() && theirs.value().host == mine.value());
  }
  return Status::OK();
}

bool ServerLinks::Serves(const std::vector<std::string>& addresses) const {
  std::lock_guard<std::mutex> lock(mu_);
  return addresses == addresses_ && peers_.size() == addresses.size() &&
         std::find(lost_.begin(), lost_.end(), true) == lost_.end();
}

bool ServerLinks::Retired(PeerId peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  return retired_.count(peer) > 0;
}

void ServerLinks::Lost(PeerId peer) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < peers_.size(); ++i) {
    if (peers_[i] == peer) lost_[i] = true;
  }
}

bool ServerLinks::connected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !peers_.empty();
}

Status ServerLinks::Identify(int rank, const std::string& token) {
  std::vector<PeerId> peers;
  std::vector<OneShot<Status>*> answers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    identified_.clear();
    for (size_t i = 0; i < peers_.size(); ++i) identified_.push_back(std::make_unique<OneShot<Status>>());
    peers = peers_;
    for (auto& answer : identified_) answers.push_back(answer.get());
  }
  for (PeerId peer : peers) {
    Message m;
    m.type = MessageType::kIdentify;
    m.sender = rank;
    m.text = token;
    transport_->Send(peer, m.Encode(), nullptr, 0, nullptr);
  }
  Deadline deadline(config_.timeout_s);
  for (size_t i = 0; i < answers.size(); ++i) {
    auto answer = answers[i]->Wait(deadline.remaining());
    const std::string name = Name(static_cast<int>(i));
    if (!answer) return DeadlineExceeded(name + " did not answer within BYTEPS_TIMEOUT");
    if (!answer->ok()) return Status(answer->code(), name + ": " + answer->message());
  }
  return Status::OK();
}

void ServerLinks::OnIdentifyReply(PeerId from, const Status& answer) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < peers_.size() && i < identified_.size(); ++i) {
    if (peers_[i] == from) identified_[i]->Set(answer);
  }
}

int ServerLinks::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(peers_.size());
}

PeerId ServerLinks::peer(int server) const {
  std::lock_guard<std::mutex> lock(mu_);
  return peers_[server];
}

std::optional<int> ServerLinks::ServerAt(PeerId peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < peers_.size(); ++i) {
    if (peers_[i] == peer) return static_cast<int>(i);
  }
  return std::nullopt;
}

std::string ServerLinks::Name(int server) const {
  std::lock_guard<std::mutex> lock(mu_);
  return NameLocked(server);
}

std::string ServerLinks::NameLocked(int server) const {
  // (A request's error may be told after the job's servers changed: a rank they no longer have.)
  if (server < 0 || static_cast<size_t>(server) >= addresses_.size()) return "server " + std::to_string(server);
  return "server " + std::to_string(server) + " (" + addresses_[server] + ")";
}

std::vector<std::string> ServerLinks::Names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (size_t s = 0; s < addresses_.size(); ++s) names.push_back(NameLocked(static_cast<int>(s)));
  return names;
}

std::vector<bool> ServerLinks::OnThisHost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return on_this_host_;
}

bool ServerLinks::AllOnThisHost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::find(on_this_host_.begin(), on_this_host_.end(), false) == on_this_host_.end();
}

}  // namespace bps
