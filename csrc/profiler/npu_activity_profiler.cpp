#include "csrc/profiler/npu_activity_profiler.h"

#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <stack>
#include <string>
#include <utility>

#include "csrc/core/npu_stream.h"

namespace torch_npu::profiler {
namespace {

// --- what the workers report while tracing ---------------------------------

std::mutex g_mutex;
std::vector<vnpu::TaskRecord> g_records;  // guarded by g_mutex
std::atomic<int> g_sessions{0};

void on_task(const vnpu::TaskRecord& record) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_records.push_back(record);
}

void start_tracing() {
  if (g_sessions.fetch_add(1) == 0) vnpu::set_trace_hook(&on_task);
}

void stop_tracing() {
  if (g_sessions.fetch_sub(1) == 1) vnpu::set_trace_hook(nullptr);
}

// Kineto's correlation ids of the host ops being run on this thread.
thread_local std::stack<uint64_t> t_correlations;

// Trace viewers sort lanes by this index; process ids stay below it.
constexpr int64_t kDeviceSortIndex = int64_t{1} << 32;

// The ACL runtime call that queues a task of `kind` on real hardware.
const char* launch_api_name(vnpu::TaskKind kind) {
  switch (kind) {
    case vnpu::TaskKind::kKernel: return "aclrtLaunchKernel";
    case vnpu::TaskKind::kCopy: return "aclrtMemcpyAsync";
    case vnpu::TaskKind::kMarker: return "aclrtRecordEvent";
    case vnpu::TaskKind::kWait: return "aclrtStreamWaitEvent";
    case vnpu::TaskKind::kHost: return "aclrtLaunchCallback";
    case vnpu::TaskKind::kGraph: return "aclmdlRIExecuteAsync";
  }
  return "aclrtLaunchKernel";
}

// mspti's activity kinds, as torch_npu's backend names them in "type".
const char* task_type_name(vnpu::TaskKind kind) {
  switch (kind) {
    case vnpu::TaskKind::kCopy: return "Memcpy";
    case vnpu::TaskKind::kMarker:
    case vnpu::TaskKind::kWait: return "Marker";
    case vnpu::TaskKind::kKernel:
    case vnpu::TaskKind::kHost:
    case vnpu::TaskKind::kGraph: break;
  }
  return "Kernel";
}

libkineto::ActivityType activity_type(vnpu::TaskKind kind) {
  switch (kind) {
    case vnpu::TaskKind::kCopy:
      return libkineto::ActivityType::GPU_MEMCPY;
    case vnpu::TaskKind::kKernel:
    case vnpu::TaskKind::kGraph:
    case vnpu::TaskKind::kMarker:
    case vnpu::TaskKind::kWait:
    case vnpu::TaskKind::kHost:
      break;
  }
  return libkineto::ActivityType::CONCURRENT_KERNEL;
}

// --- the Kineto session ------------------------------------------------------

class NpuActivitySession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    start_ns_ = to_unix_ns(vnpu::steady_now_ns());
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_records.clear();
    }
    start_tracing();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    stop_tracing();
    end_ns_ = to_unix_ns(vnpu::steady_now_ns());
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_activity,
                    int64_t /*window_start*/, int64_t /*window_end*/) override {
    buffer_.span = libkineto::TraceSpan(start_ns_, end_ns_, "npu");
    const std::vector<vnpu::TaskRecord> records = take_recorded_tasks();
    log_launches(logger, linked_activity, records);
    for (const vnpu::TaskRecord& record : records) {
      const char* name = record.info.name != nullptr ? record.info.name : vnpu::task_kind_name(record.info.kind);
      buffer_.emplace_activity(buffer_.span, activity_type(record.info.kind), std::string(name));
      libkineto::GenericTraceActivity& activity = *buffer_.activities.back();
      activity.startTime = to_unix_ns(record.start_ns);
      activity.endTime = to_unix_ns(record.end_ns);
      activity.device = record.device_index;
      // The stream as torch.npu.Stream names it (Note [Stream ids]).
      const int64_t stream_id = torch_npu::stream_id_of_index(record.stream_index);
      activity.resource = static_cast<int32_t>(stream_id);
      const auto correlation = static_cast<int32_t>(record.info.correlation_id);
      activity.id = correlation;
      if (correlation != 0) {
        activity.linked = linked_activity(correlation);
        activity.flow.id = static_cast<uint32_t>(correlation);
        activity.flow.type = libkineto::kLinkAsyncCpuGpu;
        activity.flow.start = false;
      }
      // addMetadata<T> formats with fmt, which libtorch does not export.
      activity.addMetadataQuoted("kind", vnpu::task_kind_name(record.info.kind));
      // The fields torch_npu's mspti backend gives a device activity.
      activity.addMetadataQuoted("type", task_type_name(record.info.kind));
      activity.addMetadataQuoted("streamId", std::to_string(stream_id));
      activity.addMetadataQuoted("stream", std::to_string(stream_id));
      activity.addMetadataQuoted("device", std::to_string(record.device_index));
      if (record.failed) activity.addMetadataQuoted("failed", "true");
      // The threads its body computed with (vnpu/trace.h), where CANN's profiles give a kernel's block dim.
      if (record.block_dim > 0) activity.addMetadataQuoted("block num", std::to_string(record.block_dim));
      activity.log(logger);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    // Sorted after every process id, so the NPU lane lies below the host's
    // lanes in a trace viewer, as CUDA's GPU lanes do.
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, kDeviceSortIndex, "NPU", "npu"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }

 private:
  // Note [Launch activities]
  // For each host op whose tasks ran on a stream, one host-side activity at
  // its first task's enqueue, on the enqueuing thread, named after the ACL
  // call that queues such a task (aclrtLaunchKernel, aclrtMemcpyAsync, ...):
  // the start of the op's "ac2g" flow arrows, which end on its device
  // activities (CUDA's cudaLaunchKernel does the same). Its duration is 0:
  // the runtime stamps the enqueue, not its end.
  void log_launches(libkineto::ActivityLogger& logger, const libkineto::getLinkedActivityCallback& linked_activity,
                    const std::vector<vnpu::TaskRecord>& records) {
    std::map<int32_t, const vnpu::TaskRecord*> first_launch;
    for (const vnpu::TaskRecord& record : records) {
      const auto correlation = static_cast<int32_t>(record.info.correlation_id);
      if (correlation == 0 || record.info.enqueue_ns == 0) continue;
      const vnpu::TaskRecord*& first = first_launch[correlation];
      if (first == nullptr || record.info.enqueue_ns < first->info.enqueue_ns) first = &record;
    }
    const int32_t pid = static_cast<int32_t>(getpid());
    for (const auto& [correlation, record] : first_launch) {
      buffer_.emplace_activity(buffer_.span, libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
                               std::string(launch_api_name(record->info.kind)));
      libkineto::GenericTraceActivity& launch = *buffer_.activities.back();
      launch.startTime = to_unix_ns(record->info.enqueue_ns);
      launch.endTime = launch.startTime;
      launch.device = pid;
      launch.resource = record->info.enqueue_thread;
      launch.threadId = record->info.enqueue_thread;
      launch.id = correlation;
      launch.linked = linked_activity(correlation);
      launch.flow.id = static_cast<uint32_t>(correlation);
      launch.flow.type = libkineto::kLinkAsyncCpuGpu;
      launch.flow.start = true;
      launch.addMetadataQuoted("correlation", std::to_string(correlation));
      launch.log(logger);
    }
  }

 public:

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::make_unique<libkineto::CpuTraceBuffer>(std::move(buffer_));
  }

  void pushCorrelationId(uint64_t id) override {
    t_correlations.push(id);
    vnpu::set_correlation_id(id);
  }

  void popCorrelationId() override {
    if (!t_correlations.empty()) t_correlations.pop();
    vnpu::set_correlation_id(t_correlations.empty() ? 0 : t_correlations.top());
  }

 private:
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
  libkineto::CpuTraceBuffer buffer_;
};

class NpuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& activity_types, const libkineto::Config& /*config*/) override {
    // Device activity was asked for (ProfilerActivity.PrivateUse1): Kineto's
    // CPU set also holds PRIVATEUSE1_RUNTIME, so look for the device types.
    for (auto type : activity_types) {
      if (activities_.count(type) > 0) return std::make_unique<NpuActivitySession>();
    }
    return nullptr;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/, int64_t /*duration_ms*/, const std::set<libkineto::ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_{"npu"};
  std::set<libkineto::ActivityType> activities_{
      libkineto::ActivityType::CONCURRENT_KERNEL,
      libkineto::ActivityType::GPU_MEMCPY,
  };
};

REGISTER_PRIVATEUSE1_PROFILER(NpuActivityProfiler);

}  // namespace

std::vector<vnpu::TaskRecord> take_recorded_tasks() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<vnpu::TaskRecord> out;
  out.swap(g_records);
  return out;
}

bool tracing() { return g_sessions.load() > 0; }

int64_t to_unix_ns(int64_t steady_ns) {
  // One offset per process: the two clocks advance together.
  static const int64_t offset = [] {
    const int64_t unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
    return unix_ns - vnpu::steady_now_ns();
  }();
  return steady_ns + offset;
}

}  // namespace torch_npu::profiler
