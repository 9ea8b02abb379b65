// Runs without a GPU (the rendezvous only sorts and hands over members): built and run by `make test`
// wherever nvcc is.
#include "cc/cuda/local_rendezvous.h"

#include <gtest/gtest.h>

#include <thread>

namespace bps {
namespace cuda {
namespace {

GpuTensor On(int device) { return GpuTensor{device, nullptr, nullptr}; }

TEST(LocalRendezvousTest, StartsOnceAllReplicasArrivedInDeviceOrder) {
  LocalRendezvous rendezvous;
  int starts = 0;
  std::vector<int> devices;
  std::vector<Status> results(3);
  auto start = [&](std::vector<GpuTensor> members, std::vector<std::function<void(const Status&)>> dones) {
    ++starts;
    for (const auto& m : members) devices.push_back(m.device);
    for (auto& d : dones) d(Status::OK());
  };
  for (int device : {2, 0, 1}) {
    rendezvous.Arrive("t", 3, On(device), [&results, device](const Status& s) { results[device] = s; }, start);
    EXPECT_EQ(starts, device == 1 ? 1 : 0);
  }
  EXPECT_EQ(devices, (std::vector<int>{0, 1, 2}));
  // The name can be used again for the next step.
  rendezvous.Arrive("t", 1, On(0), [](const Status&) {}, start);
  EXPECT_EQ(starts, 2);
}

TEST(LocalRendezvousTest, TwoReplicasOnOneGpuAreAnError) {
  LocalRendezvous rendezvous;
  Status second;
  auto start = [](std::vector<GpuTensor>, std::vector<std::function<void(const Status&)>>) { FAIL(); };
  rendezvous.Arrive("t", 2, On(0), [](const Status&) {}, start);
  rendezvous.Arrive("t", 2, On(0), [&](const Status& s) { second = s; }, start);
  EXPECT_EQ(second.code(), Code::kInvalidArgument);
}

TEST(LocalRendezvousTest, AMissingReplicaIsATimeoutError) {
  LocalRendezvous rendezvous;
  Status result;
  rendezvous.Arrive("lonely", 2, On(1), [&](const Status& s) { result = s; },
                    [](std::vector<GpuTensor>, std::vector<std::function<void(const Status&)>>) { FAIL(); });
  rendezvous.FailOlderThan(60);
  EXPECT_TRUE(result.ok());  // not yet
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  rendezvous.FailOlderThan(0.01);
  EXPECT_EQ(result.code(), Code::kDeadlineExceeded);
  EXPECT_NE(result.message().find("1 of 2"), std::string::npos) << result.message();
}

}  // namespace
}  // namespace cuda
}  // namespace bps
