// A whole job in one process for tests: scheduler, servers and worker engines as threads, connected by the
// in-memory transport (gloo-style multi-rank tests without sockets).
#pragma once

#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "cc/ps/job_testing.h"
#include "cc/ps/scheduler.h"
#include "cc/ps/server.h"
#include "cc/runtime/engine.h"
#include "cc/transport/inmemory_transport.h"

namespace bps {
namespace testing {

// A job of `workers` worker machines with `local_size` engines each (worker(rank), rank = machine *
// local_size + local rank) and `servers` servers plus a scheduler, all threads of this process.
class LocalJob {
 public:
  // separate_hosts: every worker machine and server advertises a host of its own, as in a real cluster (the
  // scheduler then slices partitions: slice_bytes).
  LocalJob(int workers, int servers, double timeout_s = 20, size_t credit_bytes = 4 * 4096, int local_size = 1,
           bool separate_hosts = false, size_t slice_bytes = 1024)
      : network_(std::make_shared<InMemoryNetwork>()) {
    scheduler_transport_ = CreateInMemoryTransport(network_);
    Config scheduler_config = NodeConfig(Role::kScheduler, workers, servers, 0, timeout_s);
    scheduler_config.slice_bytes = slice_bytes;
    scheduler_ = std::make_unique<Scheduler>(scheduler_config, scheduler_transport_.get());
    scheduler_thread_ = std::thread([this] { scheduler_result_ = scheduler_->Run(); });
    for (int s = 0; s < servers; ++s) {
      server_transports_.push_back(CreateInMemoryTransport(network_));
      Config server_config = NodeConfig(Role::kServer, workers, servers, 0, timeout_s);
      if (separate_hosts) server_config.node_host = "server" + std::to_string(s);
      servers_.push_back(std::make_unique<Server>(server_config, server_transports_.back().get()));
    }
    for (int s = 0; s < servers; ++s) {
      // A server's result shows in the workers' results, which the tests check.
      server_threads_.emplace_back([this, s] { servers_[s]->Run().IgnoreError(); });
    }
    std::vector<std::future<StatusOr<std::unique_ptr<Engine>>>> starting;
    for (int rank = 0; rank < workers * local_size; ++rank) {
      starting.push_back(std::async(std::launch::async, [=] {
        Config config = NodeConfig(Role::kWorker, workers, servers, rank / local_size, timeout_s, credit_bytes,
                                   local_size, rank % local_size);
        if (separate_hosts) config.node_host = "machine" + std::to_string(rank / local_size);
        return Engine::Start(config, CreateInMemoryTransport(network_));
      }));
    }
    for (auto& f : starting) {
      auto engine = f.get();
      if (!engine.ok()) {
        fprintf(stderr, "job did not start: %s\n", engine.status().ToString().c_str());
        std::abort();  // a job that did not start cannot be torn down in order
      }
      engines_.push_back(std::move(engine.value()));
    }
  }

  ~LocalJob() {
    std::vector<std::thread> stopping;
    for (auto& e : engines_) {
      if (e) stopping.emplace_back([&e] { e->Shutdown().IgnoreError(); });  // tests check their own results
    }
    for (auto& t : stopping) t.join();
    scheduler_thread_.join();
    for (auto& t : server_threads_) t.join();
    for (auto& t : server_transports_) t->Shutdown(1);
    scheduler_transport_->Shutdown(1);
  }

  Engine& worker(int i) { return *engines_[i]; }
  int workers() const { return static_cast<int>(engines_.size()); }
  void KillServer(int s) {
    server_transports_[s]->Shutdown(0);
    servers_[s]->Stop(Aborted("killed by the test"));
  }

 private:
  std::shared_ptr<InMemoryNetwork> network_;
  std::unique_ptr<Transport> scheduler_transport_;
  std::unique_ptr<Scheduler> scheduler_;
  Status scheduler_result_;
  std::thread scheduler_thread_;
  std::vector<std::unique_ptr<Transport>> server_transports_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::vector<std::thread> server_threads_;
  std::vector<std::unique_ptr<Engine>> engines_;
};

}  // namespace testing
}  // namespace bps
