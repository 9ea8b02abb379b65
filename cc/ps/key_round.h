// One key's state on a server: receive buffers per worker, the running sum of the current round,
// and the last completed round's result that pulls are answered from.
//
// Threading: private receive buffers are allocated on the transport thread (under the server's lock) when
// a payload arrives; everything else runs as one of the tasks of the key's summing thread (WorkThread), one
// at a time and in order, whether that thread runs it or the transport thread does for it (RunHereOrPost,
// when the summing thread is idle). A worker pushes round r+1 only
// after pulling round r, so a receive buffer is never overwritten before its data was summed, and a result
// is never replaced before every worker has received it.
// The same ordering lets the first push of a round become the accumulator (buffers swapped, not copied):
// the buffer that worker receives into next was the result of round r-1, which every worker has received.
// With a wider accumulator (16-bit floats) the first push waits in its receive buffer until the round
// completes; ReceiveBuffer hands that buffer to no other push meanwhile.
//
// With a SharedArena the receive buffers and results live in memory that workers on the server's host map:
// such a worker copies its push into ReceiveOffset(rank) itself and copies the sum out of result_offset().
// Since buffers are swapped, both offsets change from round to round; the server tells the worker each time.
//
// A compressed key (KeySpec::compression) receives encoded pushes, decodes each into a dense float32 sum,
// and encodes the completed sum for the pull, keeping what that encoding dropped for the next round (the
// server's error feedback). Its buffers are private: compression is for the network, not shared memory.
//
// With backup workers (`backups` > 0) a round completes with the first num_workers - backups pushes; its sum
// is scaled by num_workers / (num_workers - backups), so that dividing by num_workers gives the contributors'
// mean. A push of a round that already has its contributions (a late worker's) is dropped, counted, and
// answered with that round's sum. So the sums of the last `window` completed rounds and the latest are
// kept, and a round completes only when every worker has pushed a round at most `window` before it: a
// worker that has pushed round p is done with every sum before p, the ordering the buffer swaps rely on.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "cc/common/chunk_helpers.h"
#include "cc/common/dtype.h"
#include "cc/common/reduce_op.h"
#include "cc/common/shared_arena.h"
#include "cc/common/status.h"
#include "cc/compress/compression_spec.h"

namespace bps {

class KeyRound {
 public:
  // `arena` (may be null) provides shared buffers; where it is full the key's buffers are private. `op`
  // combines the contributions (a sum unless said otherwise). `compression` (with the key, which seeds
  // random-k) encodes pushes and results. `helpers` (may be null) spread one large sum over idle cores.
  // `backups`, `window`: see above (floating sums, uncompressed, only).
  KeyRound(DataType dtype, uint64_t num_elements, int num_workers, SharedArena* arena = nullptr,
           ReduceOp op = ReduceOp::kSum, const CompressionSpec& compression = {}, uint64_t key = 0,
           ChunkHelpers* helpers = nullptr, int backups = 0, int window = 0);
  ~KeyRound();  // gives its block of the arena back
  KeyRound(const KeyRound&) = delete;
  KeyRound& operator=(const KeyRound&) = delete;

  DataType dtype() const { return dtype_; }
  uint64_t num_elements() const { return num_elements_; }
  int num_workers() const { return num_workers_; }  // workers that push each round
  int contributions_needed() const { return num_workers_ - backups_; }  // pushes summed per round
  size_t bytes() const { return num_elements_ * DataTypeSize(dtype_); }
  // What a push and a pulled result carry: bytes(), or their encoded size.
  size_t wire_bytes() const { return wire_bytes_; }

  // Where worker `rank`'s pushed data should land; null while its push of the accumulating round waits
  // there to be combined (wide accumulators, AddWide): another push of that worker before the round
  // completes is refused anyway, and must not overwrite it. Called on the transport thread.
  void* ReceiveBuffer(int rank);
  // Whether the buffers below are in the shared arena.
  bool shared() const { return results_[0].shared(); }
  // The arena offsets of ReceiveBuffer(rank) and result(round) (shared() only: all placed up front).
  uint64_t ReceiveOffset(int rank) const { return receive_[rank].offset; }
  uint64_t result_offset(uint32_t round) const { return Slot(round).offset; }
  uint64_t result_offset() const { return result_offset(completed_round_); }

  // Adds worker `rank`'s pushed data (already in its receive buffer) to round `round` (with backups: or
  // drops it, late). Returns true when this push completed the accumulating round.
  StatusOr<bool> Add(int rank, uint32_t round);
  // A push that stays where its worker has it (`input`, bytes() in dtype(), readable until the round
  // completes) and whose sum goes to `output` (`kept` keeps both mapped until then): a worker's push from
  // its shareable heap (ShareMode::kInPlace). While every push of the round came so (and `may_wait`: no
  // reader fetches the round's sum later), they wait; the push that completes the round combines them
  // straight into one output and copies that to the others, so that each byte is read once from each
  // worker and written once to each (result_written_in_place). Otherwise the data is added as a received
  // push's would be and the sum goes to `output` when the pull is answered.
  StatusOr<bool> AddInPlace(int rank, uint32_t round, const void* input, void* output, bool may_wait,
                            std::shared_ptr<const void> kept);
  // Whether completed round `round`'s sum went straight to its pushers' outputs (AddInPlace) and is in no
  // buffer here.
  bool result_written_in_place(uint32_t round) const { return SlotFrom(round) == kWrittenInPlace; }
  // The same for a push of zeros (no data, nothing to add; sums only).
  StatusOr<bool> AddZeros(int rank, uint32_t round);
  // Counts worker `rank` as done in round `round` without a contribution (it joined): zeros in a sum, left
  // out of a min, max or product.
  StatusOr<bool> AddAbsent(int rank, uint32_t round);
  // Whether `rank` has pushed (or was counted absent in) the accumulating round.
  bool HasPushed(int rank) const { return pushed_.count(rank) > 0 || last_push_[rank] >= accumulating_round(); }

  uint32_t completed_round() const { return completed_round_; }
  uint32_t accumulating_round() const { return completed_round_ + 1; }
  // Whether the sum of completed round `round` is kept (the latest; with backups, the window's too).
  bool Retains(uint32_t round) const {
    return round >= 1 && round <= completed_round_ && completed_round_ - round < results_.size();
  }
  // The sum of `round` (Retains(round)), or of completed_round(), in dtype().
  const void* result(uint32_t round) const { return Slot(round).data; }
  const void* result() const { return result(completed_round_); }
  // Whether every push summed in `round` was zeros.
  bool result_is_zero(uint32_t round) const { return SlotFrom(round) == kNobody; }
  bool result_is_zero() const { return result_is_zero(completed_round_); }
  // The rank whose push was the only one with data in `round`, or -1 (always -1 with backups: scaled).
  int result_sole_contributor(uint32_t round) const { return SlotFrom(round) >= 0 ? SlotFrom(round) : -1; }
  int result_sole_contributor() const { return result_sole_contributor(completed_round_); }
  // Workers the accumulating round waits for (for timeout messages): those that have not pushed it, or with
  // backups, once it has its contributions, those more than the window behind.
  std::set<int> MissingWorkers() const;
  // Whether the accumulating round can no longer complete once `finished` workers push no more.
  bool WaitsOn(const std::set<int>& finished) const;
  // Whether the accumulating round has its contributions and waits for a worker behind the window.
  bool held_by_window() const { return backups_ > 0 && static_cast<int>(pushed_.size()) >= contributions_needed(); }
  int window() const { return window_; }
  // Late pushes dropped since the key was made (backups only).
  uint64_t dropped_pushes() const { return dropped_pushes_; }
  bool round_started() const { return !pushed_.empty(); }
  double round_started_at() const { return round_started_at_; }

  // A compressed key with error feedback keeps what the last result's encoding dropped: num_elements()
  // floats, saved and loaded (checkpoints) between rounds, by a contributor that has not pushed the
  // accumulating round, so that the round cannot complete meanwhile.
  bool has_residual() const { return residual_ != nullptr; }
  const float* residual() const { return residual_.get(); }
  // Where a loaded residual is received (transport thread, like ReceiveBuffer); LoadResidual takes it in
  // (summing thread, after ResidualInbox).
  float* ResidualInbox();
  void LoadResidual();

 private:
  // A buffer of bytes(): in the shared arena, or on the heap.
  struct Buffer {
    char* data = nullptr;
    uint64_t offset = kPrivate;
    std::unique_ptr<char[]> heap;
    static constexpr uint64_t kPrivate = ~uint64_t(0);
    bool shared() const { return offset != kPrivate; }
  };
  Buffer PrivateBuffer(size_t size) const;
  // The running sum: the `sum_` buffer itself when the accumulator type is the dtype, else `wide_sum_`
  // (or, compressed, `dense_`).
  void* accumulator() {
    if (dense_) return dense_.get();
    return wide_sum_ ? wide_sum_.get() : sum_.data;
  }
  void AddWide(int rank);
  Status DecodeInto(int rank);
  void EncodeResult();

  // In-place pushes waiting for the round's other pushes (AddInPlace).
  struct InPlacePush {
    int rank;
    const void* input;
    void* output;
    std::shared_ptr<const void> kept;
  };
  // Adds `input` (rank's data, elsewhere than its receive buffer) to the accumulator.
  void Accumulate(int rank, const void* input);
  // The waiting in-place pushes join the accumulator: a push of another kind came.
  void TakeInWaiting();
  // Every contribution waited in place: combined into the first output, copied to the others.
  void CombineWaiting();
  // Elements [first, first + n) of that.
  void CombineWaitingBlock(size_t first, size_t n);
  // Checks a push of `round` and counts it; `*summed`: whether its data joins the round (false: late).
  Status Admit(int rank, uint32_t round, bool* summed);
  void ClearAccumulatorIfUnset();
  bool Counted();
  bool WindowAllows() const;
  void ScaleForBackups();
  void CompleteRound();
  const Buffer& Slot(uint32_t round) const { return results_[round % results_.size()]; }
  int SlotFrom(uint32_t round) const { return result_from_[round % results_.size()]; }

  const DataType dtype_;
  const uint64_t num_elements_;
  const int num_workers_;
  const int backups_;
  const int window_;
  const ReduceOp op_;
  const CompressionSpec compression_;
  const uint64_t key_;
  const size_t wire_bytes_;
  SharedArena* const arena_;
  ChunkHelpers* const helpers_;
  std::optional<SharedArena::Block> block_;  // the arena's block holding every buffer, if shared
  size_t block_bytes_ = 0;
  std::vector<Buffer> receive_;  // per worker rank, allocated on first use
  Buffer sum_;
  std::unique_ptr<char[]> wide_sum_;  // when AccumulatorType(dtype) is wider than dtype
  std::unique_ptr<float[]> dense_;     // compressed: the decoded sum
  std::unique_ptr<float[]> residual_;  // compressed, with error feedback: what the last result's encoding dropped
  std::unique_ptr<float[]> residual_inbox_;  // a loaded residual, until LoadResidual
  // Completed rounds' sums, round r in results_[r % size]: one, or with backups window + 1.
  std::vector<Buffer> results_;
  std::set<int> pushed_;  // the accumulating round's contributors
  std::vector<uint32_t> last_push_;  // per rank: the latest round it pushed (0: none)
  uint64_t dropped_pushes_ = 0;
  // Who pushed data (not zeros) in the accumulating round, and in the completed one: a rank, or:
  static constexpr int kNobody = -1;
  static constexpr int kSeveral = -2;
  static constexpr int kWrittenInPlace = -3;  // (result_from_ only) see result_written_in_place
  std::vector<InPlacePush> waiting_in_place_;
  int data_from_ = kNobody;
  bool accumulator_set_ = false;  // the accumulating round's accumulator holds a value (data or zeros)
  // Wide accumulators (AddWide): the rank whose push is the round's only one so far, left in its receive
  // buffer (kNobody: none; read by ReceiveBuffer on the transport thread); and whether the push that
  // completed the round wrote the result already.
  std::atomic<int> pending_{kNobody};
  bool result_written_ = false;
  std::vector<int> result_from_;  // per slot of results_
  uint32_t completed_round_ = 0;
  double round_started_at_ = 0;
};

}  // namespace bps
