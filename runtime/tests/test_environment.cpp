#include <gtest/gtest.h>

#include "test_helpers.h"
#include "vnpu/environment.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace {

using vnpu_test::parse;

TEST(Environment, Defaults) {
  const vnpu::Environment env = parse({});
  EXPECT_TRUE(env.errors.empty());
  EXPECT_EQ(env.device_count, 8);
  EXPECT_FALSE(env.visible_devices.has_value());
  EXPECT_EQ(env.chip_name, "Ascend910B2");
  EXPECT_FALSE(env.device_memory_bytes.has_value());
  EXPECT_EQ(env.task_queue_enable, 1);
  EXPECT_FALSE(env.launch_blocking);
  EXPECT_FALSE(env.synchronous_launch());
  EXPECT_FALSE(env.fallback_cpu_disable);
  EXPECT_FALSE(env.compact_error_output);
  EXPECT_FALSE(env.no_memory_caching);
  EXPECT_FALSE(env.npu_alloc_conf.has_value());
  EXPECT_FALSE(env.alloc_conf.has_value());
}

TEST(Environment, DeviceCount) {
  EXPECT_EQ(parse({{"VNPU_DEVICE_COUNT", "0"}}).device_count, 0);
  EXPECT_EQ(parse({{"VNPU_DEVICE_COUNT", "64"}}).device_count, 64);
  EXPECT_EQ(parse({{"VNPU_DEVICE_COUNT", " 3 "}}).device_count, 3);
  EXPECT_EQ(parse({{"VNPU_DEVICE_COUNT", ""}}).device_count, 8);  // empty = unset

  const vnpu::Environment bad = parse({{"VNPU_DEVICE_COUNT", "abc"}});
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0], "VNPU_DEVICE_COUNT must be an integer between 0 and 64, got 'abc'");
  for (const char* value : {"65", "-1", "1.5", "4x", "99999999999999999999999"}) {
    const vnpu::Environment env = parse({{"VNPU_DEVICE_COUNT", value}});
    ASSERT_EQ(env.errors.size(), 1u) << value;
    EXPECT_NE(env.errors[0].find(std::string("got '") + value + "'"), std::string::npos);
  }
}

TEST(Environment, TaskQueueEnable) {
  EXPECT_EQ(parse({{"TASK_QUEUE_ENABLE", "2"}}).task_queue_enable, 2);
  const vnpu::Environment sync = parse({{"TASK_QUEUE_ENABLE", "0"}});
  EXPECT_TRUE(sync.errors.empty());
  EXPECT_EQ(sync.task_queue_enable, 0);
  EXPECT_TRUE(sync.synchronous_launch());

  const vnpu::Environment bad = parse({{"TASK_QUEUE_ENABLE", "3"}});
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0].rfind("TASK_QUEUE_ENABLE should be 0, 1 or 2", 0), 0u) << bad.errors[0];
  EXPECT_NE(bad.errors[0].find("'3'"), std::string::npos);
}

TEST(Environment, LaunchBlocking) {
  const vnpu::Environment on = parse({{"ASCEND_LAUNCH_BLOCKING", "1"}});
  EXPECT_TRUE(on.errors.empty());
  EXPECT_TRUE(on.launch_blocking);
  EXPECT_TRUE(on.synchronous_launch());
  EXPECT_FALSE(parse({{"ASCEND_LAUNCH_BLOCKING", "0"}}).launch_blocking);

  const vnpu::Environment bad = parse({{"ASCEND_LAUNCH_BLOCKING", "yes"}});
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_NE(bad.errors[0].find("ASCEND_LAUNCH_BLOCKING"), std::string::npos);
  EXPECT_NE(bad.errors[0].find("'yes'"), std::string::npos);
  EXPECT_FALSE(bad.launch_blocking);
}

TEST(Environment, Chip) {
  EXPECT_EQ(parse({{"VNPU_CHIP", "ascend910b3"}}).chip_name, "Ascend910B3");
  EXPECT_EQ(parse({{"VNPU_CHIP", "310P3"}}).chip_name, "Ascend310P3");

  const vnpu::Environment bad = parse({{"VNPU_CHIP", "Ascend999"}});
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_NE(bad.errors[0].find("'Ascend999'"), std::string::npos);
  EXPECT_NE(bad.errors[0].find("Ascend910B2"), std::string::npos) << "should list known chips";
  EXPECT_NE(bad.errors[0].find("Ascend310P3"), std::string::npos);
}

TEST(Environment, DeviceMemory) {
  const vnpu::Environment env = parse({{"VNPU_DEVICE_MEMORY_MB", "2048"}});
  ASSERT_TRUE(env.device_memory_bytes.has_value());
  EXPECT_EQ(*env.device_memory_bytes, 2048ull * 1024 * 1024);
  for (const char* value : {"0", "-5", "lots", "99999999999999999999"}) {
    const vnpu::Environment bad = parse({{"VNPU_DEVICE_MEMORY_MB", value}});
    ASSERT_EQ(bad.errors.size(), 1u) << value;
    EXPECT_NE(bad.errors[0].find("VNPU_DEVICE_MEMORY_MB"), std::string::npos);
  }
}

TEST(Environment, HostCores) {
  EXPECT_EQ(parse({}).host_cores, 0);  // unset: the process's threads
  EXPECT_EQ(parse({{"VNPU_HOST_CORES", "16"}}).host_cores, 16);
  for (const char* value : {"0", "-2", "1025", "many"}) {
    const vnpu::Environment bad = parse({{"VNPU_HOST_CORES", value}});
    ASSERT_EQ(bad.errors.size(), 1u) << value;
    EXPECT_NE(bad.errors[0].find("VNPU_HOST_CORES must be an integer between 1 and 1024"), std::string::npos);
  }
}

TEST(Environment, FlagsAndRawStrings) {
  const vnpu::Environment env = parse({
      {"TORCH_NPU_FALLBACK_CPU_DISABLE", "1"},
      {"TORCH_NPU_COMPACT_ERROR_OUTPUT", "1"},
      {"PYTORCH_NO_NPU_MEMORY_CACHING", "1"},
      {"PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True"},
      {"PYTORCH_ALLOC_CONF", ""},
      {"ASCEND_RT_VISIBLE_DEVICES", " 0,1 "},
  });
  EXPECT_TRUE(env.errors.empty());
  EXPECT_TRUE(env.fallback_cpu_disable);
  EXPECT_TRUE(env.compact_error_output);
  EXPECT_TRUE(env.no_memory_caching);
  EXPECT_EQ(env.npu_alloc_conf.value_or("?"), "expandable_segments:True");
  EXPECT_EQ(env.alloc_conf.value_or("?"), "");
  EXPECT_EQ(env.visible_devices.value_or("?"), " 0,1 ");

  const vnpu::Environment off = parse({{"TORCH_NPU_FALLBACK_CPU_DISABLE", "0"},
                                       {"PYTORCH_NO_NPU_MEMORY_CACHING", "true"}});
  EXPECT_FALSE(off.fallback_cpu_disable);
  EXPECT_FALSE(off.no_memory_caching);
}

TEST(Environment, SharedDeviceMemory) {
  EXPECT_FALSE(vnpu_test::parse({}).shared_device_memory);
  EXPECT_FALSE(vnpu_test::parse({{"LOCAL_WORLD_SIZE", "1"}}).shared_device_memory);
  EXPECT_TRUE(vnpu_test::parse({{"LOCAL_WORLD_SIZE", "2"}}).shared_device_memory) << "auto under torchrun";
  EXPECT_FALSE(vnpu_test::parse({{"LOCAL_WORLD_SIZE", "2"}, {"VNPU_SHARED_DEVICE_MEMORY", "0"}}).shared_device_memory);
  EXPECT_TRUE(vnpu_test::parse({{"VNPU_SHARED_DEVICE_MEMORY", "1"}}).shared_device_memory);
  const vnpu::Environment bad = vnpu_test::parse({{"VNPU_SHARED_DEVICE_MEMORY", "yes"}});
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0], "VNPU_SHARED_DEVICE_MEMORY should be 0, 1 or auto, but got 'yes'");
}

TEST(Environment, HcclErrorHandlingMonitoringAndBuffer) {
  const vnpu::Environment defaults = vnpu_test::parse({});
  EXPECT_EQ(defaults.hccl_async_error_handling, 1);
  EXPECT_FALSE(defaults.hccl_enable_monitoring);
  EXPECT_EQ(defaults.hccl_heartbeat_timeout_s, 600u);
  EXPECT_EQ(defaults.hccl_buffsize_mb, 200u);
  const vnpu::Environment old = vnpu_test::parse({{"HCCL_ASYNC_ERROR_HANDLING", "2"}});
  EXPECT_EQ(old.hccl_async_error_handling, 2);
  EXPECT_TRUE(old.hccl_async_error_handling_old_name);
  const vnpu::Environment both =
      vnpu_test::parse({{"HCCL_ASYNC_ERROR_HANDLING", "2"}, {"TORCH_HCCL_ASYNC_ERROR_HANDLING", "0"}});
  EXPECT_EQ(both.hccl_async_error_handling, 0) << "the new name wins";
  EXPECT_FALSE(both.hccl_async_error_handling_old_name);
  const vnpu::Environment set = vnpu_test::parse({{"TORCH_HCCL_ENABLE_MONITORING", "1"},
                                                  {"TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC", "30"},
                                                  {"HCCL_BUFFSIZE", "16"}});
  EXPECT_TRUE(set.hccl_enable_monitoring);
  EXPECT_EQ(set.hccl_heartbeat_timeout_s, 30u);
  EXPECT_EQ(set.hccl_buffsize_mb, 16u);
  const vnpu::Environment bad = vnpu_test::parse({{"TORCH_HCCL_ASYNC_ERROR_HANDLING", "4"},
                                                  {"TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC", "0"},
                                                  {"HCCL_BUFFSIZE", "-1"}});
  ASSERT_EQ(bad.errors.size(), 3u);
  EXPECT_EQ(bad.errors[0], "TORCH_HCCL_ASYNC_ERROR_HANDLING should be 0, 1, 2 or 3, but got '4'");
  EXPECT_EQ(bad.errors[2], "HCCL_BUFFSIZE must be a positive number of MB, got '-1'");
}

TEST(Environment, HcclDebugFilesSettings) {
  const vnpu::Environment defaults = vnpu_test::parse({});
  EXPECT_EQ(defaults.hccl_coord_check_ms, 1000u);
  EXPECT_FALSE(defaults.hccl_status_save_enable);
  EXPECT_EQ(defaults.hccl_status_save_path, "/tmp");
  EXPECT_EQ(defaults.hccl_status_save_interval_s, 2u);
  EXPECT_TRUE(defaults.nslb_cp.empty() && defaults.hccl_debug_info_pipe_file.empty());
  EXPECT_EQ(defaults.nslb_max_record_num, 1000u);
  const vnpu::Environment set = vnpu_test::parse({{"TORCH_HCCL_COORD_CHECK_MILSEC", "200"},
                                                  {"TORCH_HCCL_STATUS_SAVE_ENABLE", "1"},
                                                  {"TORCH_HCCL_STATUS_SAVE_PATH", "/var/status"},
                                                  {"TORCH_HCCL_STATUS_SAVE_INTERVAL", "5"},
                                                  {"TORCH_HCCL_DEBUG_INFO_PIPE_FILE", "/tmp/pipe_"},
                                                  {"NSLB_CP", "/tmp/nslb"},
                                                  {"NSLB_MAX_RECORD_NUM", "10"}});
  EXPECT_EQ(set.hccl_coord_check_ms, 200u);
  EXPECT_TRUE(set.hccl_status_save_enable);
  EXPECT_EQ(set.hccl_status_save_path, "/var/status");
  EXPECT_EQ(set.hccl_status_save_interval_s, 5u);
  EXPECT_EQ(set.hccl_debug_info_pipe_file, "/tmp/pipe_");
  EXPECT_EQ(set.nslb_cp, "/tmp/nslb");
  EXPECT_EQ(set.nslb_max_record_num, 10u);
  const vnpu::Environment bad = vnpu_test::parse({{"TORCH_HCCL_COORD_CHECK_MILSEC", "0"},
                                                  {"TORCH_HCCL_STATUS_SAVE_INTERVAL", "-2"},
                                                  {"NSLB_MAX_RECORD_NUM", "ten"}});
  ASSERT_EQ(bad.errors.size(), 3u);
  EXPECT_EQ(bad.errors[0], "TORCH_HCCL_COORD_CHECK_MILSEC must be a positive number of milliseconds, got '0'");
  EXPECT_EQ(bad.hccl_coord_check_ms, 1000u) << "a bad value leaves the default";
  EXPECT_EQ(bad.errors[1], "TORCH_HCCL_STATUS_SAVE_INTERVAL must be a positive number of seconds, got '-2'");
  EXPECT_EQ(bad.hccl_status_save_interval_s, 2u);
  EXPECT_EQ(bad.errors[2], "NSLB_MAX_RECORD_NUM must be a number of collectives, got 'ten'");
}

TEST(Environment, SeveralErrorsAreAllReported) {
  const vnpu::Environment env =
      parse({{"VNPU_DEVICE_COUNT", "x"}, {"TASK_QUEUE_ENABLE", "9"}});
  EXPECT_EQ(env.errors.size(), 2u);
}

TEST(Environment, ProcessEnvironmentIsParsedOnce) {
  const vnpu::Environment& a = vnpu::environment();
  const vnpu::Environment& b = vnpu::environment();
  EXPECT_EQ(&a, &b);
}

}  // namespace

namespace {

TEST(EnvironmentVariables, EveryDocumentedVariableIsReadAndRecorded) {
  std::map<std::string, std::string> all;
  for (const vnpu::EnvironmentVariable& v : vnpu::environment_variables()) {
    ASSERT_NE(v.name, nullptr);
    ASSERT_STRNE(v.meaning, "");
    all[v.name] = "0";
  }
  ASSERT_EQ(all.size(), vnpu::environment_variables().size()) << "a variable is listed twice";
  const vnpu::Environment env = vnpu_test::parse(all);
  std::map<std::string, std::string> recorded(env.raw_values.begin(), env.raw_values.end());
  // A listed variable that parse_environment() never reads would be missing.
  EXPECT_EQ(recorded, all);
}

TEST(EnvironmentVariables, UnsetVariablesAreNotRecorded) {
  const vnpu::Environment env = vnpu_test::parse({{"VNPU_DEVICE_COUNT", "3"}});
  ASSERT_EQ(env.raw_values.size(), 1u);
  EXPECT_EQ(env.raw_values[0].first, "VNPU_DEVICE_COUNT");
  EXPECT_EQ(env.raw_values[0].second, "3");
}

}  // namespace

namespace {

TEST(Environment, AclOpInitModeOutOfRangeWarnsAndKeepsTheDefault) {
  EXPECT_EQ(vnpu_test::parse({{"ACL_OP_INIT_MODE", "2"}}).acl_op_init_mode, 2);
  const vnpu::Environment env = vnpu_test::parse({{"ACL_OP_INIT_MODE", "999"}});
  EXPECT_TRUE(env.errors.empty());
  EXPECT_EQ(env.acl_op_init_mode, 0);
  ASSERT_EQ(env.warnings.size(), 1u);
  EXPECT_EQ(env.warnings[0], "Get env ACL_OP_INIT_MODE not in [0, 1, 2], so reset it to the default value 0.");
}

TEST(Environment, InfNanModeFollowsTheChipAndItsVariables) {
  // torch_npu's IsSupportInfNan: 910B / 910_93 default to inf/nan and may be
  // forced off; 910A and 310P are in saturation mode; the 950 ignores both.
  EXPECT_TRUE(vnpu_test::parse({}).inf_nan_mode);
  EXPECT_FALSE(vnpu_test::parse({{"INF_NAN_MODE_FORCE_DISABLE", "1"}}).inf_nan_mode);
  EXPECT_FALSE(vnpu_test::parse({{"VNPU_CHIP", "Ascend910A"}}).inf_nan_mode);
  EXPECT_FALSE(vnpu_test::parse({{"VNPU_CHIP", "Ascend310P3"}}).inf_nan_mode);
  EXPECT_TRUE(vnpu_test::parse({{"VNPU_CHIP", "Ascend910_9392"}}).inf_nan_mode);
  EXPECT_TRUE(vnpu_test::parse({{"VNPU_CHIP", "Ascend950"}, {"INF_NAN_MODE_FORCE_DISABLE", "1"}}).inf_nan_mode);
  const vnpu::Environment both = vnpu_test::parse({{"INF_NAN_MODE_ENABLE", "0"}, {"INF_NAN_MODE_FORCE_DISABLE", "1"}});
  EXPECT_FALSE(both.inf_nan_mode);
  EXPECT_TRUE(both.errors.empty());
  const vnpu::Environment refused = vnpu_test::parse({{"INF_NAN_MODE_ENABLE", "0"}});
  ASSERT_EQ(refused.errors.size(), 1u);
  EXPECT_NE(refused.errors[0].find("please export INF_NAN_MODE_FORCE_DISABLE=1"), std::string::npos);
  EXPECT_TRUE(vnpu_test::parse({{"VNPU_CHIP", "Ascend910A"}, {"INF_NAN_MODE_ENABLE", "0"}}).errors.empty());
  const vnpu::Environment bad = vnpu_test::parse({{"INF_NAN_MODE_ENABLE", "2"}});
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0], "INF_NAN_MODE_ENABLE should be 0 or 1.");
}

std::string write_file(const std::string& text) {
  char path[] = "/tmp/vnpu_acl_json_XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  return path;
}

TEST(Environment, AclInitConfigPathIsCheckedAsRealTorchNpuChecksIt) {
  const std::string good = write_file(R"({"dump": {"dump_scene": "lite_exception"}})");
  EXPECT_TRUE(vnpu_test::parse({{"TORCH_ACL_INIT_CONFIG_PATH", good.c_str()}}).errors.empty());
  const auto only_error = [](const std::string& path) {
    const vnpu::Environment env = vnpu_test::parse({{"TORCH_ACL_INIT_CONFIG_PATH", path.c_str()}});
    EXPECT_EQ(env.errors.size(), 1u) << path;
    return env.errors.empty() ? std::string() : env.errors[0];
  };
  EXPECT_NE(only_error("/tmp/vnpu_no_such_acl.json").find("TORCH_ACL_INIT_CONFIG_PATH /tmp/vnpu_no_such_acl.json "
                                                          "is invalid"), std::string::npos);
  const std::string broken = write_file("not a json{{{");
  EXPECT_NE(only_error(broken).find("Failed to parse user acl json"), std::string::npos);
  const std::string empty = write_file("");
  EXPECT_NE(only_error(empty).find("Failed to parse user acl json"), std::string::npos);
  const std::string with_device = write_file(R"({"defaultDevice": {"default_device": "0"}})");
  EXPECT_NE(only_error(with_device).find("contains 'defaultDevice' which is not expected"), std::string::npos);
  for (const std::string& path : {good, broken, empty, with_device}) unlink(path.c_str());
}

}  // namespace

namespace {

TEST(Environment, LogsFilterAndSubCommunicators) {
  using vnpu_test::parse;
  EXPECT_EQ(parse({}).logs_filter, "");
  EXPECT_EQ(parse({{"TORCH_NPU_LOGS_FILTER", "+a,-b"}}).logs_filter, "+a,-b");
  EXPECT_FALSE(parse({}).rootinfo_subcomm_enable);
  EXPECT_TRUE(parse({{"ROOTINFO_SUBCOMM_ENABLE", "1"}}).rootinfo_subcomm_enable);
  EXPECT_TRUE(parse({{"ROOTINFO_SUBCOMM_ENABLE", "2"}}).rootinfo_subcomm_enable);  // torch_npu: any other number
  EXPECT_FALSE(parse({{"ROOTINFO_SUBCOMM_ENABLE", "0"}}).rootinfo_subcomm_enable);
  const vnpu::Environment bad = parse({{"ROOTINFO_SUBCOMM_ENABLE", "yes"}});
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0], "ROOTINFO_SUBCOMM_ENABLE should be 0 or 1, but got 'yes'");
}

}  // namespace
