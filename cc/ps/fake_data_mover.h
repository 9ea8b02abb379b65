// Test support: a DataMover whose data lives in its own buffer (standing for a GPU's memory), and counts of
// where it moved bytes. The staging the requests name holds garbage unless the mover wrote it, so a path
// that bypassed the mover gives wrong sums.
#pragma once

#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cc/ps/data_mover.h"

namespace bps {
namespace testing {

class FakeDataMover : public DataMover {
 public:
  // `staging`: what the requests name; `device`: the bytes it stands for (as many). `deferred`: a started
  // copy moves its bytes only when waited for, 5 ms into the wait (a real copy may land as late as the end
  // of its wait), so that a caller that uses them before the wait returns sees garbage.
  FakeDataMover(char* staging, std::vector<char> device, bool deferred = false)
      : staging_(staging), deferred_(deferred), device_(std::move(device)) {}

  InFlight StartToHost(const void* staged, void* host, size_t bytes) override {
    if (!deferred_) return DataMover::StartToHost(staged, host, bytes);
    return [this, staged, host, bytes] {
      Pause();
      return ToHost(staged, host, bytes);
    };
  }
  InFlight StartFromHost(void* staged, const void* host, size_t bytes) override {
    if (!deferred_) return DataMover::StartFromHost(staged, host, bytes);
    return [this, staged, host, bytes] {
      Pause();
      return FromHost(staged, host, bytes);
    };
  }

  Status ToHost(const void* staged, void* host, size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fail_to_host_.empty()) return Status(fail_code_, fail_to_host_);
    ++(host == staged ? to_staging_ : to_elsewhere_);
    std::memcpy(host, device_.data() + (static_cast<const char*>(staged) - staging_), bytes);
    return Status::OK();
  }

  Status FromHost(void* staged, const void* host, size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fail_from_host_.empty()) return Status(fail_code_, fail_from_host_);
    ++(host == staged ? from_staging_ : from_elsewhere_);
    std::memcpy(device_.data() + (static_cast<char*>(staged) - staging_), host, bytes);
    return Status::OK();
  }

  std::vector<char> device() {
    std::lock_guard<std::mutex> lock(mu_);
    return device_;
  }
  void set_device(std::vector<char> device) {
    std::lock_guard<std::mutex> lock(mu_);
    device_ = std::move(device);
  }
  // Every later call fails with `message` (empty: none), as `code` says.
  void FailToHost(std::string message, Code code = Code::kInternal) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_to_host_ = std::move(message);
    fail_code_ = code;
  }
  void FailFromHost(std::string message, Code code = Code::kInternal) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_from_host_ = std::move(message);
    fail_code_ = code;
  }

  // Calls so far: into the staging itself (for the transport) or elsewhere (a server's shared memory).
  struct Counts {
    int to_staging = 0, to_elsewhere = 0, from_staging = 0, from_elsewhere = 0;
  };
  Counts counts() {
    std::lock_guard<std::mutex> lock(mu_);
    return Counts{to_staging_, to_elsewhere_, from_staging_, from_elsewhere_};
  }

 private:
  static void Pause() { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }

  char* const staging_;
  const bool deferred_;
  std::mutex mu_;
  std::vector<char> device_;
  std::string fail_to_host_, fail_from_host_;
  Code fail_code_ = Code::kInternal;
  int to_staging_ = 0, to_elsewhere_ = 0, from_staging_ = 0, from_elsewhere_ = 0;
};

}  // namespace testing
}  // namespace bps
