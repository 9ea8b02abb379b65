// A worker's side of the protocol, as one object for the engine: its place in the job over generations
// (worker_lifecycle.h), its connections to the servers (server_links.h), the data operations
// (worker_operations.h) and their requests in flight (request_table.h), and the servers' shared memory on
// this host (shared_pushes.h). Every request completes exactly once: with the reply, with the job's failure,
// or with a timeout (BYTEPS_TIMEOUT). This class only wires those parts together and routes messages.
#pragma once

#include <string>

#include "cc/common/config.h"
#include "cc/common/logging.h"
#include "cc/ps/message.h"
#include "cc/ps/request_table.h"
#include "cc/ps/server_links.h"
#include "cc/ps/shared_pushes.h"
#include "cc/ps/worker_lifecycle.h"
#include "cc/ps/worker_operations.h"
#include "cc/transport/transport.h"

namespace bps {

class WorkerClient : public MessageHandler {
 public:
  using Done = WorkerOperations::Done;
  using DeclareDone = WorkerOperations::DeclareDone;

  WorkerClient(const Config& config, Transport* transport);

  // See WorkerLifecycle.
  Status Start();
  Status NextGeneration();
  StatusOr<int> EndGeneration(bool joined = false) { return lifecycle_.EndGeneration(joined); }
  void RequestAbort(const std::string& why) { lifecycle_.RequestAbort(why); }
  int rank() const { return lifecycle_.rank(); }
  int num_workers() const { return lifecycle_.num_workers(); }
  int generation() const { return lifecycle_.generation(); }
  int workers_waiting() const { return lifecycle_.workers_waiting(); }
  size_t slice_bytes() const { return lifecycle_.slice_bytes(); }
  bool rejoinable() { return lifecycle_.rejoinable(); }
  bool TakeJoinedRunning() { return lifecycle_.TakeJoinedRunning(); }

  // The first failure of the job (peer lost, ABORT), or OK. Requests fail fast once it is set.
  Status failure() { return requests_.failure(); }
  // Why this generation broke (elastic), or OK.
  Status generation_failure() { return requests_.generation_failure(); }

  int num_servers() const { return servers_.size(); }
  // Whether every server listens on this worker's own host (a local job).
  bool AllServersOnThisHost() const { return servers_.AllOnThisHost(); }

  // See WorkerOperations.
  void Declare(const TensorSpec& spec, DeclareDone done) { operations_.Declare(spec, std::move(done)); }
  void PushPull(const Partition& part, uint32_t round, Participant me, DataType dtype, const void* input, void* output,
                std::function<void()> on_sent, Done done, FusedPushes* fused = nullptr,
                std::shared_ptr<DataMover> mover = nullptr, InPlaceMark in_place = nullptr) {
    operations_.PushPull(part, round, me, dtype, input, output, std::move(on_sent), std::move(done), fused,
                         std::move(mover), std::move(in_place));
  }
  void SendFused(FusedPushes* fused) { operations_.SendFused(fused); }
  void PushPullEncoded(const Partition& part, uint32_t round, Participant me, const void* encoded, void* encoded_sum,
                       size_t bytes, std::function<void()> on_sent, Done done) {
    operations_.PushPullEncoded(part, round, me, encoded, encoded_sum, bytes, std::move(on_sent), std::move(done));
  }
  void Fetch(const Partition& part, uint32_t round, DataType dtype, void* output, Done done) {
    operations_.Fetch(part, round, dtype, output, std::move(done));
  }
  void SaveResidual(const Partition& part, Participant me, float* residual, Done done) {
    operations_.SaveResidual(part, me, residual, std::move(done));
  }
  void LoadResidual(const Partition& part, Participant me, const float* residual, Done done) {
    operations_.LoadResidual(part, me, residual, std::move(done));
  }
  // See WorkerOperations::FinishMoves.
  void FinishMoves() { operations_.FinishMoves(); }
  // Fails requests that have waited longer than BYTEPS_TIMEOUT. Called periodically by the engine.
  void FailExpiredRequests() { operations_.FailExpired(); }
  // Fails every request in flight with `why` (an engine ends with some unfinished): at once those the
  // transport is done with (a reply that comes later finds none and is dropped), the others once it is.
  void FailRequests(const Status& why) { requests_.FailAll(why); }

  void* PayloadDestination(PeerId from, const std::string& header, size_t length) override {
    return operations_.ReplyDestination(from, header, length);
  }
  void OnMessage(PeerId from, const std::string& header, void* payload, size_t length) override;
  void OnPeerLost(PeerId peer, const Status& why) override {
    operations_.ForgetPeer(peer);
    lifecycle_.OnPeerLost(peer, why);
  }

 private:
  const Config config_;
  Transport* const transport_;
  ServerLinks servers_;
  RequestTable requests_;
  SharedPushes shared_;
  WorkerLifecycle lifecycle_;
  WorkerOperations operations_;
  ThrottledLog dropped_{"messages dropped or peers turned away"};
};

}  // namespace bps
