#include "cc/ps/message.h"

#include <gtest/gtest.h>

namespace bps {
namespace {

TEST(MessageTest, RoundTrips) {
  Message m;
  m.type = MessageType::kPullReply;
  m.sender = 3;
  m.request_id = 1ull << 40;
  m.key = 0xdeadbeefcafeull;
  m.round = 77;
  m.dtype = DataType::kBFloat16;
  m.num_elements = 12345;
  m.participants = 2;
  m.zeros = true;
  m.echo = true;
  m.share = ShareMode::kMapped;
  m.in_shared = true;
  m.shared_result = 8192;
  m.shared_receive = 0;
  m.heap_mapped = true;
  m.written = true;
  m.held_us = 1234567;
  m.set_status(DeadlineExceeded("slow"));
  auto back = Message::Decode(m.Encode());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value().type, m.type);
  EXPECT_EQ(back.value().sender, 3);
  EXPECT_EQ(back.value().request_id, m.request_id);
  EXPECT_EQ(back.value().key, m.key);
  EXPECT_EQ(back.value().round, 77u);
  EXPECT_EQ(back.value().dtype, DataType::kBFloat16);
  EXPECT_EQ(back.value().num_elements, 12345u);
  EXPECT_EQ(back.value().participants, 2);
  EXPECT_TRUE(back.value().zeros);
  EXPECT_TRUE(back.value().echo);
  EXPECT_EQ(back.value().share, ShareMode::kMapped);
  EXPECT_TRUE(back.value().in_shared);
  EXPECT_EQ(back.value().shared_result, 8192u);
  EXPECT_EQ(back.value().shared_receive, 0u);
  EXPECT_TRUE(back.value().heap_mapped);
  EXPECT_TRUE(back.value().written);
  EXPECT_EQ(back.value().held_us, 1234567u);
  EXPECT_EQ(Message::Decode(Message().Encode()).value().shared_result, Message::kNoOffset);
  EXPECT_EQ(Message::Decode(Message().Encode()).value().in_place_output, Message::kNoOffset);
  EXPECT_EQ(back.value().status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(back.value().text, "slow");
}

// Encode allocates its header once, for the fixed fields and the text (a field added must be counted).
TEST(MessageTest, EncodingIsTheFixedBytesAndTheText) {
  Message m;
  EXPECT_EQ(m.Encode().size(), Message::kFixedEncodedBytes);
  m.text = "a text";
  EXPECT_EQ(m.Encode().size(), Message::kFixedEncodedBytes + 6);
  m.heap_mapped = m.written = m.in_shared = true;  // (flags of one byte)
  EXPECT_EQ(m.Encode().size(), Message::kFixedEncodedBytes + 6);
  m.share = ShareMode::kInPlace;
  m.in_place_input = 4096;
  EXPECT_EQ(m.Encode().size(), Message::kFixedEncodedBytes + Message::kInPlaceEncodedBytes + 6);
  m.in_place_output = 1ull << 35;
  auto in_place = Message::Decode(m.Encode());
  ASSERT_TRUE(in_place.ok());
  EXPECT_EQ(in_place.value().in_place_input, 4096u);
  EXPECT_EQ(in_place.value().in_place_output, 1ull << 35);
  EXPECT_TRUE(in_place.value().written && in_place.value().heap_mapped && in_place.value().in_shared);
}

TEST(MessageTest, RejectsGarbageAndTruncation) {
  EXPECT_FALSE(Message::Decode("").ok());
  EXPECT_FALSE(Message::Decode("hello world, this is not ours").ok());
  Message m;
  m.text = "body";
  std::string bytes = m.Encode();
  EXPECT_FALSE(Message::Decode(bytes.substr(0, bytes.size() - 1)).ok());
}

TEST(MessageTest, BodiesRoundTrip) {
  TensorSpec spec{"layer/kernel:0", DataType::kInt64, {3, 0, 5}};
  auto spec_back = TensorSpec::Decode(spec.Encode());
  ASSERT_TRUE(spec_back.ok());
  EXPECT_EQ(spec_back.value(), spec);
  EXPECT_EQ(spec.ToString(), "int64[3,0,5]");
  EXPECT_EQ(spec.num_elements(), 0u);
  TensorSpec per_machine{"grad#s1.0", DataType::kFloat16, {7}, TensorScope::kMachine};
  auto per_machine_back = TensorSpec::Decode(per_machine.Encode());
  ASSERT_TRUE(per_machine_back.ok());
  EXPECT_EQ(per_machine_back.value(), per_machine);
  EXPECT_FALSE(per_machine == (TensorSpec{"grad#s1.0", DataType::kFloat16, {7}}));
  EXPECT_EQ(per_machine.ToString(), "float16[7] per machine");

  PartitionPlan plan;
  plan.partitions.push_back({1, 0, 10, 0});
  plan.partitions.push_back({2, 10, 3, 1});
  auto plan_back = PartitionPlan::Decode(plan.Encode());
  ASSERT_TRUE(plan_back.ok());
  ASSERT_EQ(plan_back.value().partitions.size(), 2u);
  EXPECT_EQ(plan_back.value().partitions[1].offset, 10u);
  EXPECT_EQ(plan_back.value().partitions[1].server, 1);

  AddressBook book;
  book.your_rank = 1;
  book.num_workers = 4;
  book.servers = {"a:1", "b:2"};
  book.slice_bytes = 256000;
  book.workers_on_your_host = 3;
  auto book_back = AddressBook::Decode(book.Encode());
  ASSERT_TRUE(book_back.ok());
  EXPECT_EQ(book_back.value().servers, book.servers);
  EXPECT_EQ(book_back.value().num_workers, 4);
  EXPECT_EQ(book_back.value().slice_bytes, 256000u);
  EXPECT_EQ(book_back.value().workers_on_your_host, 3);
}

TEST(MessageTest, FusedBodyRoundTripsItsMembersInOrder) {
  FusedBody body;
  for (int i = 0; i < 3; ++i) {
    Message push;
    push.type = MessageType::kPush;
    push.sender = 1;
    push.participants = 2;
    push.request_id = 100 + i;
    push.key = (uint64_t(i) << 20) | 7;
    push.round = 5;
    push.dtype = i == 1 ? DataType::kFloat16 : DataType::kInt64;
    push.num_elements = i == 2 ? 0 : 3 * i + 1;
    push.zeros = i == 2;
    body.members.push_back({push, i == 2 ? 0 : push.num_elements * DataTypeSize(push.dtype)});
  }
  auto decoded = FusedBody::Decode(body.Encode(), MessageType::kPush);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  ASSERT_EQ(decoded.value().members.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const auto& m = decoded.value().members[i];
    EXPECT_EQ(m.header.request_id, 100u + i);
    EXPECT_EQ(m.header.key, body.members[i].header.key);
    EXPECT_EQ(m.header.dtype, body.members[i].header.dtype);
    EXPECT_EQ(m.header.num_elements, body.members[i].header.num_elements);
    EXPECT_EQ(m.header.zeros, i == 2);
    EXPECT_EQ(m.header.sender, 1);
    EXPECT_EQ(m.header.participants, 2);
    EXPECT_EQ(m.payload_bytes, body.members[i].payload_bytes);
  }
  EXPECT_EQ(decoded.value().payload_bytes(), 8u + 4 * 2);
}

TEST(MessageTest, FusedBodyRejectsOtherMembersAndBadSizes) {
  FusedBody body;
  Message reply;
  reply.type = MessageType::kPullReply;
  body.members.push_back({reply, 4});
  EXPECT_FALSE(FusedBody::Decode(body.Encode(), MessageType::kPush).ok()) << "a reply inside a push";
  EXPECT_TRUE(FusedBody::Decode(body.Encode(), MessageType::kPullReply).ok());
  body.members[0].payload_bytes = ~uint64_t(0);
  EXPECT_FALSE(FusedBody::Decode(body.Encode(), MessageType::kPullReply).ok()) << "an impossible size";
  EXPECT_FALSE(FusedBody::Decode(FusedBody().Encode(), MessageType::kPush).ok()) << "no members";
  std::string cut = body.Encode();
  cut.resize(cut.size() - 3);
  EXPECT_FALSE(FusedBody::Decode(cut, MessageType::kPullReply).ok()) << "truncated";
  EXPECT_FALSE(FusedBody::Decode("garbage", MessageType::kPush).ok());
}

}  // namespace
}  // namespace bps
