#include "cc/runtime/callback_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "cc/common/status.h"

namespace bps {
namespace {

TEST(CallbackGate, OpenGateRunsCallbacksClosedGateDropsThem) {
  auto gate = std::make_shared<CallbackGate>();
  int runs = 0;
  std::function<void(const Status&)> callback = Gated(gate, [&runs](const Status& s) { runs += s.ok() ? 1 : 10; });
  callback(Status::OK());
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(gate->Close(1));
  callback(Status::OK());
  EXPECT_EQ(runs, 1);
}

TEST(CallbackGate, CloseWaitsForACallbackInside) {
  auto gate = std::make_shared<CallbackGate>();
  std::atomic<bool> inside{false}, finished{false};
  std::function<void()> slow = Gated(gate, [&] {
    inside = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    finished = true;
  });
  std::thread caller(slow);
  while (!inside) std::this_thread::yield();
  EXPECT_TRUE(gate->Close(5));
  EXPECT_TRUE(finished);  // Close returned only after the callback did
  caller.join();
}

TEST(CallbackGate, CloseGivesUpOnACallbackThatDoesNotReturn) {
  auto gate = std::make_shared<CallbackGate>();
  std::atomic<bool> inside{false}, release{false};
  std::function<void()> stuck = Gated(gate, [&] {
    inside = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  std::thread caller(stuck);
  while (!inside) std::this_thread::yield();
  EXPECT_FALSE(gate->Close(0.1));
  release = true;
  caller.join();
}

TEST(CallbackGate, TheGateOutlivesItsOwnerThroughItsCallbacks) {
  std::function<void()> late;
  int runs = 0;
  {
    auto gate = std::make_shared<CallbackGate>();
    late = Gated(gate, [&runs] { ++runs; });
    gate->Close(1);
  }  // the owner (an engine) is gone; the callback still holds the gate
  late();
  EXPECT_EQ(runs, 0);
}

}  // namespace
}  // namespace bps
