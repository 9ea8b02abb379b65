#include "cc/ps/key_round.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "cc/common/clock.h"
#include "cc/compress/codec.h"
#include "cc/reducer/cpu_reducer.h"
#include "cc/reducer/parallel_reducer.h"

namespace bps {
namespace {

constexpr size_t kPageBytes = 4096;
constexpr size_t kCacheLineBytes = 64;
// A round of pushes in place is combined and copied out in blocks that stay in a core's L1 cache.
constexpr size_t kInPlaceBlockBytes = 16 << 10;

}  // namespace

KeyRound::KeyRound(DataType dtype, uint64_t num_elements, int num_workers, SharedArena* arena, ReduceOp op,
                   const CompressionSpec& compression, uint64_t key, ChunkHelpers* helpers, int backups, int window)
    : dtype_(dtype),
      num_elements_(num_elements),
      num_workers_(num_workers),
      backups_(backups),
      window_(backups > 0 ? window : 0),
      op_(op),
      compression_(compression),
      key_(key),
      wire_bytes_(compression.on() ? EncodedBytes(compression, num_elements) : bytes()),
      arena_(arena),
      helpers_(helpers),
      receive_(num_workers),
      results_(backups > 0 ? window + 1 : 1),
      last_push_(num_workers, 0),
      result_from_(results_.size(), kSeveral) {
  if (compression_.on()) {
    results_[0] = PrivateBuffer(wire_bytes_);
    dense_.reset(new float[num_elements + 1]);
    if (compression_.error_feedback) {
      residual_.reset(new float[num_elements + 1]);
      std::fill(residual_.get(), residual_.get() + num_elements, 0.f);
    }
    return;
  }
  // All of a key's buffers are shared or none (swapped buffers must stay where a worker can find them),
  // so they are taken from the arena in one block. Pages nobody writes use no memory. Buffers of a page or
  // more start on a page; smaller ones on a cache line, so that small keys stay small.
  const size_t align = bytes() >= kPageBytes ? kPageBytes : kCacheLineBytes;
  const size_t stride = (std::max<size_t>(bytes(), 1) + align - 1) / align * align;
  std::optional<SharedArena::Block>& block = block_;
  const size_t slots = results_.size();
  block_bytes_ = stride * (num_workers + 1 + slots);
  if (arena != nullptr) block = arena->Allocate(block_bytes_);
  if (block) {
    auto place = [&](Buffer& buffer, size_t index) {
      buffer.data = block->data + index * stride;
      buffer.offset = block->offset + index * stride;
    };
    for (size_t slot = 0; slot < slots; ++slot) place(results_[slot], slot);
    place(sum_, slots);
    for (int rank = 0; rank < num_workers; ++rank) place(receive_[rank], slots + 1 + rank);
  } else {
    for (Buffer& result : results_) result = PrivateBuffer(bytes());
  }
  if (AccumulatorType(dtype) != dtype) {
    wide_sum_.reset(new char[num_elements * DataTypeSize(AccumulatorType(dtype)) + 1]);
  } else if (!sum_.data) {
    sum_ = PrivateBuffer(bytes());
  }
}

KeyRound::~KeyRound() {
  if (block_) arena_->Discard(*block_, block_bytes_);
}

KeyRound::Buffer KeyRound::PrivateBuffer(size_t size) const {
  Buffer buffer;
  buffer.heap.reset(new char[size + 1]);
  buffer.data = buffer.heap.get();
  return buffer;
}

void* KeyRound::ReceiveBuffer(int rank) {
  if (pending_.load() == rank) return nullptr;
  if (!receive_[rank].data) receive_[rank] = PrivateBuffer(wire_bytes_);
  return receive_[rank].data;
}

Status KeyRound::Admit(int rank, uint32_t round, bool* summed) {
  *summed = true;
  if (backups_ > 0) {
    // Each worker pushes its rounds in order, late or not.
    if (round > accumulating_round() || round != last_push_[rank] + 1) {
      return FailedPrecondition("worker " + std::to_string(rank) + " pushed round " + std::to_string(round) +
                                " after round " + std::to_string(last_push_[rank]) + " while the server expects "
                                "round " + std::to_string(accumulating_round()) + " at most");
    }
    if (round < accumulating_round() && !Retains(round)) {
      return Internal("worker " + std::to_string(rank) + " pushed round " + std::to_string(round) +
                      ", whose sum is no longer kept (the window holds rounds after " +
                      std::to_string(completed_round_ - results_.size()) + ")");
    }
    last_push_[rank] = round;
    if (round < accumulating_round() || static_cast<int>(pushed_.size()) >= contributions_needed()) {
      *summed = false;  // late: its round has every contribution it takes
      ++dropped_pushes_;
      return Status::OK();
    }
  } else if (round != accumulating_round()) {
    return FailedPrecondition("worker " + std::to_string(rank) + " pushed round " + std::to_string(round) +
                              " while the server expects round " + std::to_string(accumulating_round()));
  }
  last_push_[rank] = round;
  if (!pushed_.insert(rank).second) {
    return FailedPrecondition("worker " + std::to_string(rank) + " pushed round " + std::to_string(round) +
                              " twice");
  }
  if (pushed_.size() == 1) round_started_at_ = NowSeconds();
  return Status::OK();
}

// Whether the push just admitted completed the round (which is then completed).
bool KeyRound::Counted() {
  if (static_cast<int>(pushed_.size()) < contributions_needed() || !WindowAllows()) return false;
  TakeInWaiting();  // (a contributor counted absent completed a round of waiting pushes)
  CompleteRound();
  return true;
}

// Completing round c reuses the slot of round c - window - 1: every worker must be done with it.
bool KeyRound::WindowAllows() const {
  if (backups_ == 0) return true;
  for (uint32_t pushed : last_push_) {
    if (pushed + window_ < accumulating_round()) return false;
  }
  return true;
}

StatusOr<bool> KeyRound::AddInPlace(int rank, uint32_t round, const void* input, void* output, bool may_wait,
                                    std::shared_ptr<const void> kept) {
  if (compression_.on()) return InvalidArgument("a compressed key takes encoded pushes only, not in place");
  bool summed = false;
  BPS_RETURN_IF_ERROR(Admit(rank, round, &summed));
  if (!summed) return Counted();
  // (pushed_ counts this push already.)
  const bool all_waiting = waiting_in_place_.size() + 1 == pushed_.size() && !accumulator_set_ &&
                           pending_ == kNobody;
  if (may_wait && backups_ == 0 && all_waiting) {
    waiting_in_place_.push_back(InPlacePush{rank, input, output, std::move(kept)});
    if (static_cast<int>(pushed_.size()) < contributions_needed()) return false;
    CombineWaiting();
    return true;
  }
  TakeInWaiting();
  Accumulate(rank, input);
  return Counted();
}

void KeyRound::Accumulate(int rank, const void* input) {
  data_from_ = data_from_ == kNobody ? rank : kSeveral;
  void* acc = accumulator();
  if (pending_ != kNobody) {  // (wide accumulators) a first push waits in its receive buffer
    CombineTwoIntoAccumulator(helpers_, op_, dtype_, acc, receive_[pending_.load()].data, input, num_elements_);
    pending_ = kNobody;
  } else if (accumulator_set_) {
    CombineIntoAccumulator(helpers_, op_, dtype_, acc, input, num_elements_);
  } else {
    StoreToAccumulator(helpers_, dtype_, acc, input, num_elements_);
  }
  accumulator_set_ = true;
}

void KeyRound::TakeInWaiting() {
  for (const InPlacePush& push : waiting_in_place_) Accumulate(push.rank, push.input);
  waiting_in_place_.clear();
}

void KeyRound::CombineWaiting() {
  const std::vector<InPlacePush>& pushes = waiting_in_place_;
  char* out = static_cast<char*>(pushes[0].output);
  const size_t element = DataTypeSize(dtype_);
  // Block by block, each block's result copied to the other outputs while it is still in the core's cache:
  // every input is read once and every output written once.
  auto combine = [&](size_t begin, size_t end) {
    for (size_t from = begin; from < end; from += kInPlaceBlockBytes) {
      const size_t to = std::min(end, from + kInPlaceBlockBytes);
      CombineWaitingBlock(from / element, (to - from) / element);
      for (size_t i = 1; i < pushes.size(); ++i) {
        char* other = static_cast<char*>(pushes[i].output);
        if (other != out) std::memcpy(other + from, out + from, to - from);
      }
    }
  };
  if (helpers_ != nullptr) {
    helpers_->Run(bytes(), kParallelGrainBytes, kPageBytes, combine);
  } else {
    combine(0, bytes());
  }
  const uint32_t round = accumulating_round();
  result_from_[round % results_.size()] = kWrittenInPlace;
  waiting_in_place_.clear();
  data_from_ = kNobody;
  accumulator_set_ = false;
  pushed_.clear();
  ++completed_round_;
}

void KeyRound::CombineWaitingBlock(size_t first, size_t n) {
  const std::vector<InPlacePush>& pushes = waiting_in_place_;
  const size_t element = DataTypeSize(dtype_);
  auto input = [&](size_t i) { return static_cast<const char*>(pushes[i].input) + first * element; };
  char* out = static_cast<char*>(pushes[0].output) + first * element;
  const size_t count = pushes.size();
  if (count == 1) {
    if (out != input(0)) std::memcpy(out, input(0), n * element);
  } else if (wide_sum_) {
    if (count == 2) {
      CombineTwoAndLoad(nullptr, op_, dtype_, input(0), input(1), out, n);
      return;
    }
    char* acc = wide_sum_.get() + first * DataTypeSize(AccumulatorType(dtype_));
    CombineTwoIntoAccumulator(nullptr, op_, dtype_, acc, input(0), input(1), n);
    for (size_t i = 2; i < count; ++i) CombineIntoAccumulator(nullptr, op_, dtype_, acc, input(i), n);
    LoadFromAccumulator(nullptr, dtype_, acc, out, n);
  } else {
    // An output may be its own push's input (TensorFlow forwarded it): it is then combined into, not over.
    if (out == input(0)) {
      CombineIntoAccumulator(nullptr, op_, dtype_, out, input(1), n);
    } else if (out == input(1)) {
      CombineIntoAccumulator(nullptr, op_, dtype_, out, input(0), n);
    } else {
      CombineTwoIntoAccumulator(nullptr, op_, dtype_, out, input(0), input(1), n);
    }
    for (size_t i = 2; i < count; ++i) CombineIntoAccumulator(nullptr, op_, dtype_, out, input(i), n);
  }
}

StatusOr<bool> KeyRound::Add(int rank, uint32_t round) {
  bool summed = false;
  BPS_RETURN_IF_ERROR(Admit(rank, round, &summed));
  if (!summed) return Counted();
  TakeInWaiting();
  if (compression_.on()) {
    Status decoded = DecodeInto(rank);
    if (!decoded.ok()) {
      pushed_.erase(rank);  // the push is refused as a whole: the worker may not count as having pushed
      last_push_[rank] = round - 1;
      return decoded;
    }
    return Counted();
  }
  data_from_ = data_from_ == kNobody ? rank : kSeveral;
  if (wide_sum_) {
    AddWide(rank);
  } else if (!accumulator_set_) {
    accumulator_set_ = true;
    // The first push is the sum so far: take its buffer instead of copying it. The worker's next push
    // (after this round's result reached it) lands in the old accumulator, of the same size.
    std::swap(sum_, receive_[rank]);
  } else {
    CombineIntoAccumulator(helpers_, op_, dtype_, accumulator(), receive_[rank].data, num_elements_);
  }
  return Counted();
}

// A round's first push waits in its receive buffer (ReceiveBuffer keeps any other push of its worker out
// until the round completes) and is combined with the second in one pass; the push that completes the round
// is combined straight into the result. A round of two pushes then reads each once and writes the result
// once. Not with backups: their sums are scaled before the result is written, and a round that has its
// contributions may still wait for the window.
void KeyRound::AddWide(int rank) {
  const void* pushed = receive_[rank].data;
  const bool completes = backups_ == 0 && static_cast<int>(pushed_.size()) == contributions_needed();
  if (completes && (pending_ != kNobody || accumulator_set_)) {
    void* result = results_[accumulating_round() % results_.size()].data;
    if (pending_ != kNobody) {
      CombineTwoAndLoad(helpers_, op_, dtype_, receive_[pending_.load()].data, pushed, result, num_elements_);
    } else {
      CombineAndLoad(helpers_, op_, dtype_, wide_sum_.get(), pushed, result, num_elements_);
    }
    pending_ = kNobody;
    result_written_ = true;
  } else if (pending_ != kNobody) {
    CombineTwoIntoAccumulator(helpers_, op_, dtype_, wide_sum_.get(), receive_[pending_.load()].data, pushed,
                              num_elements_);
    pending_ = kNobody;
    accumulator_set_ = true;
  } else if (accumulator_set_) {
    CombineIntoAccumulator(helpers_, op_, dtype_, wide_sum_.get(), pushed, num_elements_);
  } else if (backups_ == 0 && !completes) {
    pending_ = rank;
  } else {
    accumulator_set_ = true;
    StoreToAccumulator(helpers_, dtype_, wide_sum_.get(), pushed, num_elements_);
  }
}

StatusOr<bool> KeyRound::AddZeros(int rank, uint32_t round) {
  if (op_ != ReduceOp::kSum) {
    return InvalidArgument(std::string("a push of zeros to a ") + ReduceOpName(op_) + " (zeros stand for data in sums only)");
  }
  bool summed = false;
  BPS_RETURN_IF_ERROR(Admit(rank, round, &summed));
  if (summed) {
    TakeInWaiting();
    ClearAccumulatorIfUnset();
  }
  return Counted();
}

StatusOr<bool> KeyRound::AddAbsent(int rank, uint32_t round) {
  if (op_ == ReduceOp::kSum) return AddZeros(rank, round);
  bool summed = false;
  BPS_RETURN_IF_ERROR(Admit(rank, round, &summed));
  return Counted();
}

void KeyRound::ClearAccumulatorIfUnset() {
  if (accumulator_set_) return;
  accumulator_set_ = true;
  if (pending_ != kNobody) {  // a waiting first push is the sum so far
    StoreToAccumulator(helpers_, dtype_, accumulator(), receive_[pending_.load()].data, num_elements_);
    pending_ = kNobody;
    return;
  }
  std::memset(accumulator(), 0, num_elements_ * DataTypeSize(AccumulatorType(dtype_)));
}

Status KeyRound::DecodeInto(int rank) {
  // Checked before anything is added, so that a refused push leaves the sum as it was.
  const char* wire = receive_[rank].data;
  BPS_RETURN_IF_ERROR(CheckEncoded(compression_, wire, wire_bytes_, num_elements_));
  ClearAccumulatorIfUnset();
  return DecodeAdd(compression_, wire, wire_bytes_, num_elements_, PartitionSeed(key_, accumulating_round()),
                   dense_.get());
}

// The pulled result is the encoded sum; with error feedback, what the encoding dropped joins the next sum.
void KeyRound::EncodeResult() {
  float* sum = dense_.get();
  const uint64_t seed = PartitionSeed(key_, accumulating_round());
  if (residual_) {
    const float* residual = residual_.get();
    for (uint64_t i = 0; i < num_elements_; ++i) sum[i] += residual[i];
  }
  Encode(compression_, sum, num_elements_, seed, results_[0].data, residual_ != nullptr);
  if (residual_) std::swap(dense_, residual_);  // the sum is now the leftover; the old leftover is cleared next
}

float* KeyRound::ResidualInbox() {
  if (!residual_inbox_) residual_inbox_.reset(new float[num_elements_ + 1]);
  return residual_inbox_.get();
}

// The inbox stays allocated: the transport thread may be receiving into it again while this runs.
void KeyRound::LoadResidual() {
  std::copy(residual_inbox_.get(), residual_inbox_.get() + num_elements_, residual_.get());
}

// The contributors' sum stands for every worker's: times num_workers / contributions_needed, in the
// accumulator's type (float32 for 16-bit floats), so that the usual division by num_workers gives their mean.
void KeyRound::ScaleForBackups() {
  if (AccumulatorType(dtype_) == DataType::kFloat64) {
    const double scale = static_cast<double>(num_workers_) / contributions_needed();
    double* sum = static_cast<double*>(accumulator());
    for (uint64_t i = 0; i < num_elements_; ++i) sum[i] *= scale;
  } else {
    const float scale = static_cast<float>(num_workers_) / static_cast<float>(contributions_needed());
    float* sum = static_cast<float*>(accumulator());
    for (uint64_t i = 0; i < num_elements_; ++i) sum[i] *= scale;
  }
}

void KeyRound::CompleteRound() {
  // (Clearing: only when every contribution was absent, a result nobody will pull; or a waiting first push.)
  if (!result_written_) ClearAccumulatorIfUnset();
  if (backups_ > 0) ScaleForBackups();
  const uint32_t round = accumulating_round();
  Buffer& slot = results_[round % results_.size()];
  if (compression_.on()) {
    EncodeResult();
  } else if (result_written_) {
    result_written_ = false;
  } else if (!wide_sum_) {
    // Same layout: swap buffers instead of copying. The slot's old sum was received by every worker already.
    std::swap(sum_, slot);
  } else {
    LoadFromAccumulator(helpers_, dtype_, wide_sum_.get(), slot.data, num_elements_);
  }
  // An encoded sum is nobody's push, and neither is a scaled one.
  result_from_[round % results_.size()] =
      compression_.on() || (backups_ > 0 && data_from_ != kNobody) ? kSeveral : data_from_;
  data_from_ = kNobody;
  accumulator_set_ = false;
  pushed_.clear();
  ++completed_round_;
}

std::set<int> KeyRound::MissingWorkers() const {
  std::set<int> missing;
  const bool has_contributions = static_cast<int>(pushed_.size()) >= contributions_needed();
  for (int r = 0; r < num_workers_; ++r) {
    const bool waited_for = has_contributions ? last_push_[r] + window_ < accumulating_round() : !HasPushed(r);
    if (waited_for) missing.insert(r);
  }
  return missing;
}

bool KeyRound::WaitsOn(const std::set<int>& finished) const {
  const std::set<int> missing = MissingWorkers();
  if (backups_ == 0 || static_cast<int>(pushed_.size()) >= contributions_needed()) {
    for (int r : missing) {
      if (finished.count(r)) return true;
    }
    return false;
  }
  int can_still_push = 0;
  for (int r : missing) can_still_push += finished.count(r) ? 0 : 1;
  return static_cast<int>(pushed_.size()) + can_still_push < contributions_needed();
}

}  // namespace bps
