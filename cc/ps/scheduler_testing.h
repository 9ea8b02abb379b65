// Test support for the scheduler's protocol: the test plays every server and worker (a Node each) over the
// in-memory transport against a real Scheduler.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "cc/ps/inbox_testing.h"
#include "cc/ps/scheduler.h"
#include "cc/transport/inmemory_transport.h"

namespace bps {
namespace testing {

inline bool Contains(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

// A process of the job, played by the test.
struct Node {
  Inbox inbox;  // outlives the transport that delivers to it
  std::unique_ptr<Transport> transport;
  PeerId scheduler = -1;
  std::string address;

  void Send(const Message& m) { transport->Send(scheduler, m.Encode(), nullptr, 0, nullptr); }
  void Send(MessageType type, const std::string& text = "", uint64_t request_id = 0) {
    Message m;
    m.type = type;
    m.text = text;
    m.request_id = request_id;
    Send(m);
  }
  // The address book the scheduler sent this node (or its refusal).
  StatusOr<AddressBook> Book(double seconds = 5) {
    auto m = inbox.Next(MessageType::kAddressBook, seconds);
    if (!m) return DeadlineExceeded("no address book");
    if (!m->second.status().ok()) return m->second.status();
    return AddressBook::Decode(m->second.text);
  }
  // The status of the next message of `type`, or DEADLINE_EXCEEDED if none came.
  Status Outcome(MessageType type, double seconds = 5) {
    auto m = inbox.Next(type, seconds);
    return m ? m->second.status() : DeadlineExceeded(std::string("no ") + MessageTypeName(type));
  }
  bool Gets(MessageType type, double seconds = 5) { return inbox.Next(type, seconds).has_value(); }
};

class SchedulerTest : public ::testing::Test {
 protected:
  // A job of two worker machines of one process each and one server.
  // elastic: workers 1..3 (min_workers, max_workers), BYTEPS_ELASTIC_TIMEOUT `elastic_timeout_s`.
  void StartScheduler(double timeout_s = 20, ElasticLimits elastic = {}, double elastic_timeout_s = 600,
                      int num_server = 1) {
    config_.min_workers = elastic.min_workers;
    config_.max_workers = elastic.max_workers;
    config_.elastic_timeout_s = elastic_timeout_s;
    config_.role = Role::kScheduler;
    config_.root_uri = "scheduler";
    config_.root_port = 1;
    config_.num_worker = 2;
    config_.num_server = num_server;
    config_.partition_bytes = 4096;
    config_.slice_bytes = 1024;
    config_.timeout_s = timeout_s;
    scheduler_transport_ = CreateInMemoryTransport(network_);
    scheduler_ = std::make_unique<Scheduler>(config_, scheduler_transport_.get());
    result_ = std::async(std::launch::async, [this] { return scheduler_->Run(); });
  }

  void TearDown() override {
    // Nodes that go away end a job that has not ended: a lost server aborts it.
    for (Node& node : nodes_) node.transport->Shutdown(0);
    if (result_.valid()) {
      EXPECT_EQ(result_.wait_for(std::chrono::seconds(30)), std::future_status::ready) << "the scheduler hangs";
    }
    if (scheduler_transport_) scheduler_transport_->Shutdown(0);
  }

  Node& Connect(const std::string& address) {
    Node& node = nodes_.emplace_back();
    node.address = address;
    node.transport = CreateInMemoryTransport(network_);
    node.transport->SetHandler(&node.inbox);
    node.scheduler = node.transport->Connect("scheduler:1", 5, Link::kControl).value();
    return node;
  }

  Node& Register(Role role, int worker_id, const std::string& address, int num_worker = 2) {
    Node& node = Connect(address);
    RegisterBody b;
    b.role = static_cast<int32_t>(role);
    b.worker_id = worker_id;
    b.num_worker = num_worker;
    b.num_server = config_.num_server;
    b.min_workers = config_.min_workers;
    b.max_workers = config_.max_workers;
    b.address = address;
    node.Send(MessageType::kRegister, b.Encode());
    return node;
  }

  // Server and workers registered, the job started; the server shares a host with worker 0.
  void StartJob() {
    server_ = &Register(Role::kServer, 0, "hosta:1");
    worker_[1] = &Register(Role::kWorker, 1, "hostb:2");
    worker_[0] = &Register(Role::kWorker, 0, "hosta:3");
    auto book = server_->Book();
    ASSERT_TRUE(book.ok()) << book.status().ToString();
    server_book_ = book.value();
    server_->Send(MessageType::kServerReady);
    for (int w = 0; w < 2; ++w) {
      auto worker_book = worker_[w]->Book();
      ASSERT_TRUE(worker_book.ok()) << worker_book.status().ToString();
      worker_book_[w] = worker_book.value();
    }
  }

  // Worker `w` declares `spec` (request id 10 + w).
  void Declare(int w, const TensorSpec& spec) { worker_[w]->Send(MessageType::kDeclare, spec.Encode(), 10 + w); }

  // The server confirms the next key plan.
  void ConfirmKeyPlan() {
    auto plan = server_->inbox.Next(MessageType::kKeyPlan);
    ASSERT_TRUE(plan);
    Message reply;
    reply.type = MessageType::kKeyPlanReply;
    reply.request_id = plan->second.request_id;
    server_->Send(reply);
  }

  Status Result(double seconds = 10) {
    if (result_.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
      return DeadlineExceeded("the scheduler is still running");
    }
    return result_.get();
  }

  static TensorSpec Spec(std::vector<int64_t> shape) {
    TensorSpec spec;
    spec.name = "grad";
    spec.shape = std::move(shape);
    return spec;
  }

  std::shared_ptr<InMemoryNetwork> network_ = std::make_shared<InMemoryNetwork>();
  Config config_;
  std::unique_ptr<Transport> scheduler_transport_;
  std::unique_ptr<Scheduler> scheduler_;
  std::future<Status> result_;
  std::deque<Node> nodes_;
  Node* server_ = nullptr;
  Node* worker_[2] = {nullptr, nullptr};
  AddressBook server_book_, worker_book_[2];
};


class ElasticSchedulerTest : public SchedulerTest {
 protected:
  // The server forgets the generation and is ready for the next one, whose book it gets first.
  AddressBook ResetAndReady(bool dropped) {
    auto reset = server_->inbox.Next(MessageType::kReset);
    EXPECT_TRUE(reset);
    if (reset) {
      EXPECT_EQ(reset->second.text == kDroppedMark, dropped);
    }
    server_->Send(MessageType::kResetReply);
    auto book = server_->Book();
    EXPECT_TRUE(book.ok()) << book.status().ToString();
    server_->Send(MessageType::kServerReady);
    return book.ok() ? book.value() : AddressBook();
  }
  AddressBook WorkerBook(Node& node) {
    auto book = node.Book();
    EXPECT_TRUE(book.ok()) << book.status().ToString();
    return book.ok() ? book.value() : AddressBook();
  }
};

}  // namespace testing
}  // namespace bps
