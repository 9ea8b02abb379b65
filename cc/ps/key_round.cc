#include "cc/ps/key_round.h"

#include <cstring>
#include <utility>

#include "cc/common/clock.h"
#include "cc/reducer/cpu_reducer.h"

namespace bps {

KeyRound::KeyRound(DataType dtype, uint64_t num_elements, int num_workers)
    : dtype_(dtype), num_elements_(num_elements), num_workers_(num_workers), receive_(num_workers) {
  accumulator_.reset(new char[num_elements * DataTypeSize(AccumulatorType(dtype)) + 1]);
  result_storage_.reset(new char[bytes() + 1]);
  result_ = result_storage_.get();
}

void* KeyRound::ReceiveBuffer(int rank) {
  if (!receive_[rank]) receive_[rank].reset(new char[bytes() + 1]);
  return receive_[rank].get();
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
  data_from_ = data_from_ == kNobody ? rank : kSeveral;
  if (pushed_.size() == 1) {
    if (AccumulatorType(dtype_) == dtype_) {
      // The first push is the sum so far: take its buffer instead of copying it. The worker's next push
      // (after this round's result reached it) lands in the old accumulator, of the same size.
      std::swap(accumulator_, receive_[rank]);
    } else {
      StoreToAccumulator(dtype_, accumulator_.get(), receive_[rank].get(), num_elements_);
    }
  } else {
    AddToAccumulator(dtype_, accumulator_.get(), receive_[rank].get(), num_elements_);
  }
  return Counted();
}

StatusOr<bool> KeyRound::AddZeros(int rank, uint32_t round) {
  BPS_RETURN_IF_ERROR(Admit(rank, round));
  if (pushed_.size() == 1) {
    std::memset(accumulator_.get(), 0, num_elements_ * DataTypeSize(AccumulatorType(dtype_)));
  }
  return Counted();
}

void KeyRound::CompleteRound() {
  if (AccumulatorType(dtype_) == dtype_) {
    // Same layout: swap buffers instead of copying. The old result was received by every worker already.
    std::swap(accumulator_, result_storage_);
  } else {
    LoadFromAccumulator(dtype_, accumulator_.get(), result_storage_.get(), num_elements_);
  }
  result_ = result_storage_.get();
  result_from_ = data_from_;
  data_from_ = kNobody;
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
