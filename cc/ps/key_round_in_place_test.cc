// KeyRound's pushes in place (AddInPlace): waiting while every push of the round came so, joining the
// accumulator once another kind of push (or an absent worker) comes.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cc/compress/compression_spec.h"
#include "cc/ps/key_round.h"

namespace bps {
namespace {

std::vector<float> Result(const KeyRound& key, uint32_t round) {
  const float* sum = static_cast<const float*>(key.result(round));
  return std::vector<float>(sum, sum + key.num_elements());
}

bool AddInPlace(KeyRound& key, int rank, uint32_t round, const std::vector<float>& in, std::vector<float>& out,
                bool may_wait = true) {
  auto completed = key.AddInPlace(rank, round, in.data(), out.data(), may_wait, nullptr);
  EXPECT_TRUE(completed.ok()) << completed.status().ToString();
  return completed.ok() && completed.value();
}

TEST(KeyRoundInPlaceTest, PushesThatAllCameInPlaceAreSummedIntoEveryOutput) {
  KeyRound key(DataType::kFloat32, 3, 3);
  std::vector<float> a{1, 2, 3}, b{10, 20, 30}, c{100, 200, 300};
  std::vector<float> out_b(3, -1), out_c(3, -1);
  EXPECT_FALSE(AddInPlace(key, 0, 1, a, a));  // its output is its input (TensorFlow forwarded it)
  EXPECT_FALSE(AddInPlace(key, 1, 1, b, out_b));
  EXPECT_EQ(b, (std::vector<float>{10, 20, 30})) << "nothing written before the round completes";
  EXPECT_TRUE(AddInPlace(key, 2, 1, c, out_c));
  EXPECT_TRUE(key.result_written_in_place(1));
  const std::vector<float> sum{111, 222, 333};
  EXPECT_EQ(a, sum);
  EXPECT_EQ(out_b, sum);
  EXPECT_EQ(out_c, sum);
  EXPECT_EQ(c, (std::vector<float>{100, 200, 300}));
  EXPECT_FALSE(key.result_is_zero(1));
  EXPECT_EQ(key.result_sole_contributor(1), -1);
}

TEST(KeyRoundInPlaceTest, APushOfAnotherKindMakesTheWaitingOnesJoinTheSum) {
  KeyRound key(DataType::kFloat32, 2, 3);
  std::vector<float> a{1, 2}, out_a(2), c{100, 200}, out_c(2);
  EXPECT_FALSE(AddInPlace(key, 0, 1, a, out_a));
  const float b[] = {10, 20};
  std::memcpy(key.ReceiveBuffer(1), b, sizeof(b));
  EXPECT_FALSE(key.Add(1, 1).value());
  EXPECT_TRUE(AddInPlace(key, 2, 1, c, out_c));
  EXPECT_FALSE(key.result_written_in_place(1)) << "the sum is in the key's buffer, for the copied push's reply";
  EXPECT_EQ(Result(key, 1), (std::vector<float>{111, 222}));
  EXPECT_EQ(out_a, (std::vector<float>{0, 0})) << "written when the pull is answered";
}

TEST(KeyRoundInPlaceTest, AnAbsentWorkerOrZerosCompleteARoundOfWaitingPushes) {
  KeyRound key(DataType::kFloat32, 2, 2);
  std::vector<float> a{1, 2}, out(2);
  EXPECT_FALSE(AddInPlace(key, 0, 1, a, out));
  EXPECT_TRUE(key.AddAbsent(1, 1).value());
  EXPECT_EQ(Result(key, 1), a);
  EXPECT_FALSE(AddInPlace(key, 1, 2, a, out));
  EXPECT_TRUE(key.AddZeros(0, 2).value());
  EXPECT_EQ(Result(key, 2), a);
}

TEST(KeyRoundInPlaceTest, SixteenBitFloatsAreCombinedInFloat32) {
  KeyRound key(DataType::kFloat16, 1, 3);
  // 2048 + 1 + 1 in float16 one by one rounds to 2048 each time; in float32 it is 2050.
  const uint16_t big = 0x6800, one = 0x3C00;  // 2048, 1
  std::vector<uint16_t> a{big}, b{one}, c{one}, out(1), out_b(1), out_c(1);
  EXPECT_FALSE(key.AddInPlace(0, 1, a.data(), out.data(), true, nullptr).value());
  EXPECT_FALSE(key.AddInPlace(1, 1, b.data(), out_b.data(), true, nullptr).value());
  EXPECT_TRUE(key.AddInPlace(2, 1, c.data(), out_c.data(), true, nullptr).value());
  EXPECT_EQ(out[0], 0x6801);  // 2050
  EXPECT_EQ(out_c[0], 0x6801);
}

TEST(KeyRoundInPlaceTest, WithBackupsOrReadersOrCompressionPushesDoNotWait) {
  std::vector<float> a{1, 2}, b{3, 4}, out_a(2), out_b(2);
  KeyRound backups(DataType::kFloat32, 2, 3, nullptr, ReduceOp::kSum, {}, 0, nullptr, /*backups=*/1, /*window=*/1);
  EXPECT_FALSE(AddInPlace(backups, 0, 1, a, out_a));
  EXPECT_TRUE(AddInPlace(backups, 1, 1, b, out_b));
  EXPECT_FALSE(backups.result_written_in_place(1));
  EXPECT_EQ(Result(backups, 1), (std::vector<float>{6, 9}));  // scaled by 3/2

  KeyRound published(DataType::kFloat32, 2, 1);
  EXPECT_TRUE(AddInPlace(published, 0, 1, a, out_a, /*may_wait=*/false));
  EXPECT_FALSE(published.result_written_in_place(1));
  EXPECT_EQ(Result(published, 1), a);

  auto spec = CompressionSpec::Parse("onebit");
  ASSERT_TRUE(spec.ok());
  KeyRound compressed(DataType::kFloat32, 2, 2, nullptr, ReduceOp::kSum, spec.value());
  EXPECT_EQ(compressed.AddInPlace(0, 1, a.data(), out_a.data(), true, nullptr).status().code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace bps
