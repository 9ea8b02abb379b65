#include "cc/common/config.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

namespace bps {
namespace {

Environment Base() {
  return {{"DMLC_ROLE", "worker"},       {"DMLC_PS_ROOT_URI", "127.0.0.1"}, {"DMLC_PS_ROOT_PORT", "9000"},
          {"DMLC_NUM_WORKER", "2"},      {"DMLC_NUM_SERVER", "1"},          {"DMLC_WORKER_ID", "1"},
          {"BYTEPS_JOB_SECRET", "0123456789abcdef0123"}};
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
  EXPECT_EQ(config.value().min_spread_bytes, 65536u);
  Environment spread = Base();
  spread["BYTEPS_MIN_SPREAD_BYTES"] = "1048576";
  EXPECT_EQ(Config::FromEnvironment(spread).value().min_spread_bytes, 1048576u);
  spread["BYTEPS_MIN_SPREAD_BYTES"] = "4";
  EXPECT_NE(Config::FromEnvironment(spread).status().message().find("BYTEPS_MIN_SPREAD_BYTES"), std::string::npos);
}

// The summing threads follow the cores this process may use unless BYTEPS_SERVER_ENGINE_THREAD says otherwise.
TEST(ConfigTest, SumThreadsDefaultToTheCores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int cores = CPU_COUNT(&set);
  EXPECT_EQ(DefaultSumThreads(), std::min(cores, kMaxDefaultSumThreads));
  EXPECT_EQ(Config::FromEnvironment(Base()).value().server_sum_threads, DefaultSumThreads());
  Environment set_threads = Base();
  set_threads["BYTEPS_SERVER_ENGINE_THREAD"] = "3";
  EXPECT_EQ(Config::FromEnvironment(set_threads).value().server_sum_threads, 3);
  set_threads["BYTEPS_SERVER_ENGINE_THREAD"] = "0";
  EXPECT_NE(Config::FromEnvironment(set_threads).status().message().find("BYTEPS_SERVER_ENGINE_THREAD"),
            std::string::npos);
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

TEST(ConfigTest, AnElasticJobHasLimitsAroundItsFirstSize) {
  Environment env = Base();
  EXPECT_FALSE(Config::FromEnvironment(env).value().elastic()) << "a job is elastic only when asked";
  env["BYTEPS_MAX_WORKERS"] = "4";
  env["DMLC_WORKER_ID"] = "3";  // a place beyond the first workers: it may join later
  auto config = Config::FromEnvironment(env);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config.value().elastic());
  EXPECT_EQ(config.value().min_workers, 1);
  EXPECT_EQ(config.value().max_workers, 4);
  EXPECT_EQ(config.value().elastic_timeout_s, 600);
  env["BYTEPS_MIN_WORKERS"] = "2";
  env["BYTEPS_ELASTIC_TIMEOUT"] = "30";
  config = Config::FromEnvironment(env);
  EXPECT_EQ(config.value().min_workers, 2);
  EXPECT_EQ(config.value().elastic_timeout_s, 30);

  for (auto bad : std::vector<std::pair<std::string, std::string>>{
           {"BYTEPS_MIN_WORKERS", "3"}, {"BYTEPS_MIN_WORKERS", "0"}, {"BYTEPS_MAX_WORKERS", "1"},
           {"BYTEPS_ELASTIC_TIMEOUT", "-1"}, {"DMLC_WORKER_ID", "4"}, {"BYTEPS_LOCAL_SIZE", "2"}}) {
    Environment wrong = env;
    wrong[bad.first] = bad.second;
    auto refused = Config::FromEnvironment(wrong);
    ASSERT_FALSE(refused.ok()) << bad.first << "=" << bad.second;
    EXPECT_NE(refused.status().message().find(bad.first), std::string::npos) << refused.status().message();
  }
  Environment timeout_only = Base();
  timeout_only["BYTEPS_ELASTIC_TIMEOUT"] = "30";
  EXPECT_NE(Config::FromEnvironment(timeout_only).status().message().find("not elastic"), std::string::npos);
}

// Backup workers: a whole number below the job's worker processes, checked by every role.
TEST(ConfigTest, BackupWorkersLeaveSomeoneToSum) {
  Environment env = Base();
  EXPECT_EQ(Config::FromEnvironment(env).value().backup_workers, 0);
  EXPECT_EQ(Config::FromEnvironment(env).value().backup_window, Config::kDefaultBackupWindow);
  env["BYTEPS_BACKUP_WORKERS"] = "1";
  env["BYTEPS_BACKUP_WINDOW"] = "2";
  auto config = Config::FromEnvironment(env);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config.value().backup_workers, 1);
  EXPECT_EQ(config.value().backup_window, 2);
  env["BYTEPS_BACKUP_WORKERS"] = "3";
  for (const char* role : {"server", "scheduler"}) {  // as bpslaunch starts them: no BYTEPS_LOCAL_SIZE
    Environment service = env;
    service["DMLC_ROLE"] = role;
    EXPECT_TRUE(Config::FromEnvironment(service).ok()) << role;
  }
  env["BYTEPS_LOCAL_SIZE"] = "2";  // 4 worker processes on 2 machines
  EXPECT_TRUE(Config::FromEnvironment(env).ok());
  for (const char* role : {"worker", "server", "scheduler"}) {
    for (auto bad : std::vector<std::pair<std::string, std::string>>{{"BYTEPS_BACKUP_WORKERS", "4"},
                                                                     {"BYTEPS_BACKUP_WORKERS", "-1"},
                                                                     {"BYTEPS_BACKUP_WORKERS", "1.5"},
                                                                     {"BYTEPS_BACKUP_WORKERS", "one"},
                                                                     {"BYTEPS_BACKUP_WINDOW", "0"},
                                                                     {"BYTEPS_MAX_WORKERS", "4"}}) {
      Environment wrong = env;
      wrong["DMLC_ROLE"] = role;
      wrong[bad.first] = bad.second;
      if (bad.first == "BYTEPS_MAX_WORKERS") wrong["BYTEPS_LOCAL_SIZE"] = "1", wrong["BYTEPS_BACKUP_WORKERS"] = "1";
      auto refused = Config::FromEnvironment(wrong);
      ASSERT_FALSE(refused.ok()) << role << " " << bad.first << "=" << bad.second;
      EXPECT_NE(refused.status().message().find("BYTEPS_BACKUP_W"), std::string::npos) << refused.status().message();
    }
  }
}

TEST(ConfigTest, TcpIoThreadsDefaultToHalfTheCoresFromOneToFour) {
  EXPECT_EQ(DefaultTcpIoThreads(0), 1);
  EXPECT_EQ(DefaultTcpIoThreads(2), 1);
  EXPECT_EQ(DefaultTcpIoThreads(6), 3);
  EXPECT_EQ(DefaultTcpIoThreads(128), 4);
  Environment env = Base();
  env["BYTEPS_TCP_IO_THREADS"] = "3";
  EXPECT_EQ(Config::FromEnvironment(env).value().tcp_io_threads, 3);
  env["BYTEPS_TCP_IO_THREADS"] = "0";
  auto refused = Config::FromEnvironment(env);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("BYTEPS_TCP_IO_THREADS"), std::string::npos);
}

TEST(ConfigTest, RdmaTransportsAreRecognisedByWholeName) {
  for (const char* tls : {"rc", "rc_x,sm,self", "tcp,ud_v", "dc_mlx5", "ib", "sm,self,rc_verbs"}) {
    EXPECT_TRUE(ListsRdmaTransport(tls)) << tls;
  }
  for (const char* tls : {"", "tcp,sm,self", "tcp,cuda_copy,cuda_ipc", "posix,sysv,cma", "^rc", "tcp,rcache"}) {
    EXPECT_FALSE(ListsRdmaTransport(tls)) << tls;
  }
}

TEST(ConfigTest, RdmaFromTheFlagOrTheTransportLists) {
  Environment env = Base();
  EXPECT_FALSE(Config::FromEnvironment(env).value().rdma());
  env["UCX_TLS"] = "rc_x,sm,self";
  EXPECT_TRUE(Config::FromEnvironment(env).value().rdma());
  env["BYTEPS_UCX_TLS"] = "tcp,sm,self";  // wins over UCX_TLS
  EXPECT_FALSE(Config::FromEnvironment(env).value().rdma());
  env = Base();
  env["DMLC_ENABLE_RDMA"] = "1";
  EXPECT_TRUE(Config::FromEnvironment(env).value().rdma());
}

// Asynchronous training: BYTEPS_STALENESS implies it; both turn off shared memory and fusion.
TEST(ConfigTest, OneStragglerModeAtATime) {
  for (const char* role : {"worker", "server", "scheduler"}) {
    for (const char* mode : {"BYTEPS_ENABLE_ASYNC", "BYTEPS_STALENESS"}) {
      Environment env = Base();
      env["DMLC_ROLE"] = role;
      env[mode] = "1";
      env["BYTEPS_BACKUP_WORKERS"] = "1";
      auto refused = Config::FromEnvironment(env);
      ASSERT_FALSE(refused.ok()) << role << " " << mode;
      EXPECT_NE(refused.status().message().find("Unset one of them"), std::string::npos) << refused.status().message();
    }
  }
}

TEST(ConfigTest, GpuDirectCopies) {
  Environment env = Base();
  EXPECT_TRUE(Config::FromEnvironment(env).value().gpu_direct_copies);
  env["BYTEPS_GPU_DIRECT_COPIES"] = "0";
  EXPECT_FALSE(Config::FromEnvironment(env).value().gpu_direct_copies);
  env["BYTEPS_GPU_DIRECT_COPIES"] = "yes";
  auto refused = Config::FromEnvironment(env);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("BYTEPS_GPU_DIRECT_COPIES"), std::string::npos) << refused.status().message();
}

TEST(ConfigTest, AsyncAndStaleness) {
  Environment env = Base();
  EXPECT_FALSE(Config::FromEnvironment(env).value().async);
  env["BYTEPS_ENABLE_ASYNC"] = "1";
  Config async = Config::FromEnvironment(env).value();
  EXPECT_TRUE(async.async);
  EXPECT_EQ(async.staleness, -1);
  EXPECT_FALSE(async.shared_memory);
  EXPECT_FALSE(async.fusion);
  env.erase("BYTEPS_ENABLE_ASYNC");
  env["BYTEPS_STALENESS"] = "0";
  Config bounded = Config::FromEnvironment(env).value();
  EXPECT_TRUE(bounded.async);
  EXPECT_EQ(bounded.staleness, 0);
  Environment compressed = Base();
  compressed["BYTEPS_ENABLE_ASYNC"] = "1";
  compressed["BYTEPS_COMPRESSION"] = "none";
  EXPECT_TRUE(Config::FromEnvironment(compressed).ok());
  compressed["BYTEPS_COMPRESSION"] = "onebit";
  EXPECT_NE(Config::FromEnvironment(compressed).status().message().find("does not offer gradient compression"),
            std::string::npos);
  for (const char* bad : {"-1", "1.5", "two"}) {
    env["BYTEPS_STALENESS"] = bad;
    auto config = Config::FromEnvironment(env);
    ASSERT_FALSE(config.ok()) << bad;
    EXPECT_NE(config.status().message().find("BYTEPS_STALENESS='" + std::string(bad) + "' is invalid"),
              std::string::npos)
        << config.status().message();
  }
}

TEST(ConfigTest, TimeoutsMustBeFiniteAndBounded) {
  for (const char* bad : {"inf", "1e10", "nan", "0", "-1", "604801", "ten"}) {
    Environment env = Base();
    env["BYTEPS_TIMEOUT"] = bad;
    auto config = Config::FromEnvironment(env);
    ASSERT_FALSE(config.ok()) << bad;
    EXPECT_NE(config.status().message().find("at most 604800"), std::string::npos) << config.status().message();
  }
  Environment env = Base();
  env["BYTEPS_TIMEOUT"] = "604800";
  EXPECT_DOUBLE_EQ(Config::FromEnvironment(env).value().timeout_s, 604800);
}

TEST(ConfigTest, AJobSecretIsRequiredAndNeverShown) {
  Environment env = Base();
  env.erase("BYTEPS_JOB_SECRET");
  auto missing = Config::FromEnvironment(env);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("BYTEPS_JOB_SECRET"), std::string::npos);
  env["BYTEPS_JOB_SECRET"] = "short-one";
  auto short_one = Config::FromEnvironment(env);
  ASSERT_FALSE(short_one.ok());
  EXPECT_EQ(short_one.status().message().find("short-one"), std::string::npos) << "the secret must not be shown";
  env["BYTEPS_JOB_SECRET_FILE"] = "/nonexistent";
  EXPECT_NE(Config::FromEnvironment(env).status().message().find("set one of them"), std::string::npos);
}

TEST(ConfigTest, AJobSecretFromAFile) {
  char path[] = "/tmp/bps_tf_secret_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const char text[] = "from-a-file-0123456789\n";
  ASSERT_EQ(write(fd, text, sizeof(text) - 1), static_cast<ssize_t>(sizeof(text) - 1));
  close(fd);
  Environment env = Base();
  env.erase("BYTEPS_JOB_SECRET");
  env["BYTEPS_JOB_SECRET_FILE"] = path;
  auto config = Config::FromEnvironment(env);
  unlink(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config.value().job_secret, "from-a-file-0123456789");
}

TEST(ConfigTest, HostNamesResolveAtOnceOrFailAtOnce) {
  Environment env = Base();
  env["DMLC_PS_ROOT_URI"] = "localhost";
  auto config = Config::FromEnvironment(env);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config.value().root_uri, "127.0.0.1");
  env["DMLC_PS_ROOT_URI"] = "no-such-host.invalid";
  auto bad = Config::FromEnvironment(env);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("DMLC_PS_ROOT_URI='no-such-host.invalid'"), std::string::npos);
}

TEST(ConfigTest, TheTransportIsTcpUnlessUcxIsAskedFor) {
  Environment env = Base();
  EXPECT_EQ(Config::FromEnvironment(env).value().transport, TransportKind::kTcp);
  env["DMLC_ENABLE_RDMA"] = "1";
  EXPECT_EQ(Config::FromEnvironment(env).value().transport, TransportKind::kUcx);
  env["BYTEPS_TRANSPORT"] = "tcp";
  EXPECT_EQ(Config::FromEnvironment(env).value().transport, TransportKind::kTcp);
  env = Base();
  env["BYTEPS_UCX_TLS"] = "tcp,sm,self";
  EXPECT_EQ(Config::FromEnvironment(env).value().transport, TransportKind::kUcx);
  env["BYTEPS_TRANSPORT"] = "carrier-pigeon";
  EXPECT_FALSE(Config::FromEnvironment(env).ok());
}

TEST(ConfigTest, SchedulerNeedsNoWorkerId) {
  Environment env = Base();
  env["DMLC_ROLE"] = "scheduler";
  env.erase("DMLC_WORKER_ID");
  EXPECT_TRUE(Config::FromEnvironment(env).ok());
}

}  // namespace
}  // namespace bps
