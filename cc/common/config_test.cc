#include "cc/common/config.h"

#include <gtest/gtest.h>

namespace bps {
namespace {

Environment Base() {
  return {{"DMLC_ROLE", "worker"},       {"DMLC_PS_ROOT_URI", "127.0.0.1"}, {"DMLC_PS_ROOT_PORT", "9000"},
          {"DMLC_NUM_WORKER", "2"},      {"DMLC_NUM_SERVER", "1"},          {"DMLC_WORKER_ID", "1"}};
}

TEST(ConfigTest, ParsesAWorker) {
  auto config = Config::FromEnvironment(Base());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config.value().role, Role::kWorker);
  EXPECT_EQ(config.value().root_port, 9000);
  EXPECT_EQ(config.value().rank(), 1);
  EXPECT_EQ(config.value().partition_bytes, 4096000u);
  EXPECT_EQ(config.value().slice_bytes, 256000u);
  EXPECT_FALSE(config.value().scheduling_credit.has_value());
  Environment whole = Base();
  whole["BYTEPS_SLICE_BYTES"] = "0";
  EXPECT_EQ(Config::FromEnvironment(whole).value().slice_bytes, 0u);
  whole["BYTEPS_SLICE_BYTES"] = "-5";
  EXPECT_NE(Config::FromEnvironment(whole).status().message().find("BYTEPS_SLICE_BYTES"), std::string::npos);
}

TEST(ConfigTest, EachMissingVariableIsNamed) {
  for (const char* name : {"DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_WORKER",
                           "DMLC_NUM_SERVER", "DMLC_WORKER_ID"}) {
    Environment env = Base();
    env.erase(name);
    auto config = Config::FromEnvironment(env);
    ASSERT_FALSE(config.ok()) << name;
    EXPECT_NE(config.status().message().find(name), std::string::npos) << config.status().message();
  }
}

TEST(ConfigTest, ContradictionsAreNamed) {
  Environment env = Base();
  env["DMLC_WORKER_ID"] = "2";
  auto config = Config::FromEnvironment(env);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("DMLC_WORKER_ID='2'"), std::string::npos);
  EXPECT_NE(config.status().message().find("DMLC_NUM_WORKER=2"), std::string::npos);

  env = Base();
  env["DMLC_ROLE"] = "boss";
  EXPECT_NE(Config::FromEnvironment(env).status().message().find("DMLC_ROLE='boss'"), std::string::npos);

  env = Base();
  env["DMLC_PS_ROOT_PORT"] = "70000";
  EXPECT_FALSE(Config::FromEnvironment(env).ok());

  env = Base();
  env["BYTEPS_TIMEOUT"] = "-1";
  EXPECT_NE(Config::FromEnvironment(env).status().message().find("BYTEPS_TIMEOUT"), std::string::npos);
}

TEST(ConfigTest, SchedulerNeedsNoWorkerId) {
  Environment env = Base();
  env["DMLC_ROLE"] = "scheduler";
  env.erase("DMLC_WORKER_ID");
  EXPECT_TRUE(Config::FromEnvironment(env).ok());
}

}  // namespace
}  // namespace bps
