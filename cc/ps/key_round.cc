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

}  // namespace

KeyRound::KeyRound(DataType dtype, uint64_t num_elements, int num_workers, SharedArena* arena, ReduceOp op,
                   const CompressionSpec& compression, uint64_t key, ChunkHelpers* helpers)
    : dtype_(dtype),
      num_elements_(num_elements),
      num_workers_(num_workers),
      op_(op),
      compression_(compression),
      key_(key),
      wire_bytes_(compression.on() ? EncodedBytes(compression, num_elements) : bytes()),
      arena_(arena),
      helpers_(helpers),
      receive_(num_workers) {
  if (compression_.on()) {
    result_ = PrivateBuffer(wire_bytes_);
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
  block_bytes_ = stride * (num_workers + 2);
  if (arena != nullptr) block = arena->Allocate(block_bytes_);
  if (block) {
    auto place = [&](Buffer& buffer, size_t index) {
      buffer.data = block->data + index * stride;
      buffer.offset = block->offset + index * stride;
    };
    place(result_, 0);
    place(sum_, 1);
    for (int rank = 0; rank < num_workers; ++rank) place(receive_[rank], 2 + rank);
  } else {
    result_ = PrivateBuffer(bytes());
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
  if (!receive_[rank].data) receive_[rank] = PrivateBuffer(wire_bytes_);
  return receive_[rank].data;
}

Status KeyRound::Admit(int rank, uint32_t round) {
  if (round != accumulating_round()) {
    return FailedPrecondition("worker " + std::to_string(rank) + " pushed round " + std::to_string(round) +
                              " while the server expects round " + std::to_string(accumulating_round()));
  }
  if (!pushed_.insert(rank).second) {
    return FailedPrecondition("worker " + std::to_string(rank) + " pushed round " + std::to_string(round) +
                              " twice");
  }
  if (pushed_.size() == 1) round_started_at_ = NowSeconds();
  return Status::OK();
}

// Whether the push just admitted completed the round (which is then completed).
bool KeyRound::Counted() {
  if (static_cast<int>(pushed_.size()) < num_workers_) return false;
  CompleteRound();
  return true;
}

StatusOr<bool> KeyRound::Add(int rank, uint32_t round) {
  BPS_RETURN_IF_ERROR(Admit(rank, round));
  if (compression_.on()) {
    Status decoded = DecodeInto(rank);
    if (!decoded.ok()) {
      pushed_.erase(rank);  // the push is refused as a whole: the worker may not count as having pushed
      return decoded;
    }
    return Counted();
  }
  data_from_ = data_from_ == kNobody ? rank : kSeveral;
  if (!accumulator_set_) {
    accumulator_set_ = true;
    if (!wide_sum_) {
      // The first push is the sum so far: take its buffer instead of copying it. The worker's next push
      // (after this round's result reached it) lands in the old accumulator, of the same size.
      std::swap(sum_, receive_[rank]);
    } else {
      StoreToAccumulator(helpers_, dtype_, accumulator(), receive_[rank].data, num_elements_);
    }
  } else {
    CombineIntoAccumulator(helpers_, op_, dtype_, accumulator(), receive_[rank].data, num_elements_);
  }
  return Counted();
}

StatusOr<bool> KeyRound::AddZeros(int rank, uint32_t round) {
  if (op_ != ReduceOp::kSum) {
    return InvalidArgument(std::string("a push of zeros to a ") + ReduceOpName(op_) + " (zeros stand for data in sums only)");
  }
  BPS_RETURN_IF_ERROR(Admit(rank, round));
  ClearAccumulatorIfUnset();
  return Counted();
}

StatusOr<bool> KeyRound::AddAbsent(int rank, uint32_t round) {
  if (op_ == ReduceOp::kSum) return AddZeros(rank, round);
  BPS_RETURN_IF_ERROR(Admit(rank, round));
  return Counted();
}

void KeyRound::ClearAccumulatorIfUnset() {
  if (accumulator_set_) return;
  accumulator_set_ = true;
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
  Encode(compression_, sum, num_elements_, seed, result_.data, residual_ != nullptr);
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

void KeyRound::CompleteRound() {
  ClearAccumulatorIfUnset();  // (only when every contribution was absent: a result nobody will pull)
  if (compression_.on()) {
    EncodeResult();
  } else if (!wide_sum_) {
    // Same layout: swap buffers instead of copying. The old result was received by every worker already.
    std::swap(sum_, result_);
  } else {
    LoadFromAccumulator(helpers_, dtype_, wide_sum_.get(), result_.data, num_elements_);
  }
  result_from_ = compression_.on() ? kSeveral : data_from_;  // an encoded sum is nobody's push
  data_from_ = kNobody;
  accumulator_set_ = false;
  pushed_.clear();
  ++completed_round_;
}

std::set<int> KeyRound::MissingWorkers() const {
  std::set<int> missing;
  for (int r = 0; r < num_workers_; ++r) {
    if (!pushed_.count(r)) missing.insert(r);
  }
  return missing;
}

}  // namespace bps
