// torch_npu._C: the Python face of the adaptor. Thin bindings only; the
// Python package (torch_npu/) builds the user-facing API on top.
#include <torch/csrc/Generator.h>

#include <chrono>
#include <thread>
#include <torch/csrc/utils/pybind.h>

#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_event.h"
#include "csrc/core/npu_generator.h"
#include "csrc/core/npu_gil.h"
#include "csrc/core/npu_stream.h"
#include "csrc/ops/cpu_fallback.h"
#include "csrc/ops/launch.h"
#include "csrc/ops/sync_point.h"
#include "csrc/ops/sync_kernel.h"
#include "runtime/include/vnpu/environment.h"
#include "runtime/include/vnpu/event.h"

namespace torch_npu {

void register_hooks();
void register_format_serialization();
void bind_memory(pybind11::module& m);

namespace {

namespace py = pybind11;


py::dict environment_dict() {
  const vnpu::Environment& env = vnpu::environment();
  py::dict d;
  d["VNPU_DEVICE_COUNT"] = env.device_count;
  d["ASCEND_RT_VISIBLE_DEVICES"] = env.visible_devices ? py::cast(*env.visible_devices) : py::none();
  d["VNPU_CHIP"] = env.chip_name;
  d["VNPU_DEVICE_MEMORY_MB"] =
      env.device_memory_bytes ? py::cast(*env.device_memory_bytes / (1024 * 1024)) : py::none();
  d["TASK_QUEUE_ENABLE"] = env.task_queue_enable;
  d["ASCEND_LAUNCH_BLOCKING"] = env.launch_blocking;
  d["TORCH_NPU_FALLBACK_CPU_DISABLE"] = env.fallback_cpu_disable;
  d["TORCH_NPU_COMPACT_ERROR_OUTPUT"] = env.compact_error_output;
  d["PYTORCH_NPU_ALLOC_CONF"] = env.npu_alloc_conf ? py::cast(*env.npu_alloc_conf) : py::none();
  d["PYTORCH_ALLOC_CONF"] = env.alloc_conf ? py::cast(*env.alloc_conf) : py::none();
  d["PYTORCH_NO_NPU_MEMORY_CACHING"] = env.no_memory_caching;
  d["errors"] = env.errors;
  return d;
}

py::dict device_properties(int64_t device) {
  vnpu::Device& d = runtime_device(resolve_device_index(device));
  const vnpu::ChipProfile& p = d.profile();
  py::dict out;
  out["name"] = p.name;
  out["soc_version"] = p.soc_version;
  out["total_memory"] = d.memory().capacity();
  out["cube_core_num"] = p.cube_core_num;
  out["vector_core_num"] = p.vector_core_num;
  out["L2_cache_size"] = p.l2_cache_bytes;
  out["major"] = p.capability_major;
  out["minor"] = p.capability_minor;
  out["supports_bf16"] = p.supports_bf16;
  out["physical_id"] = d.physical_id();
  return out;
}

py::tuple stream_tuple(const c10::Stream& s) {
  return py::make_tuple(s.id(), static_cast<int>(s.device_index()), static_cast<int>(s.device_type()));
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "vNPU: torch_npu for a virtual Ascend NPU (C++ adaptor)";

  m.def("_init", [](const std::vector<std::string>& excluded) {
    register_hooks();
    install_gil_release_on_host_waits();
    register_format_serialization();
    install_device_memory_cpu_allocator();
    return register_sync_native_kernels(excluded);
  });
  m.def("_environment", &environment_dict);

  // Devices.
  m.def("_device_count", [] { return static_cast<int>(device_count()); });
  m.def("_init_error", [] { return device_init_error(); });
  m.def("_current_device", [] { return static_cast<int>(current_device()); });
  m.def("_set_device", [](int64_t d) { set_current_device(checked_device_index(d)); });
  m.def("_check_device", [](int64_t d) { checked_device_index(d); });
  m.def("_is_initialized", [] { return is_initialized(); });
  m.def("_device_was_used", [](int64_t d) {
    return is_initialized() && !runtime_device(checked_device_index(d)).created_streams().empty();
  });
  m.def("_is_in_bad_fork", [] { return is_in_bad_fork(); });
  m.def("_lazy_init", [] {
    check_not_forked();
    if (device_count() > 0) mark_initialized();
  });
  m.def("_synchronize", [](int64_t d) {
    py::gil_scoped_release no_gil;
    synchronize_device(d < 0 ? -1 : resolve_device_index(d));
  });
  m.def("_device_properties", &device_properties);
  m.def("_mem_get_info", [](int64_t d) {
    vnpu::Device& dev = runtime_device(resolve_device_index(d));
    return py::make_tuple(dev.memory().free_bytes(), dev.memory().capacity());
  });

  // Streams (as (stream_id, device_index, device_type) for torch.Stream).
  m.def("_current_stream", [](int64_t d) { return stream_tuple(current_stream(resolve_device_index(d))); });
  m.def("_default_stream", [](int64_t d) { return stream_tuple(default_stream(resolve_device_index(d))); });
  // torch.npu._sleep: like torch.cuda._sleep, keeps the current stream busy
  // for a while (tests of stream ordering and concurrency).
  m.def("_set_sync_debug_mode", &set_sync_debug_mode);
  m.def("_get_sync_debug_mode", &sync_debug_mode);
  m.def("_sleep", [](int64_t microseconds) {
    NPU_CHECK_WITH(ValueError, ErrCode::kValue, microseconds >= 0, "_sleep expects a non-negative duration");
    const auto device = current_device();
    try {
      current_runtime_stream(device).enqueue("_sleep", [microseconds] {
        std::this_thread::sleep_for(std::chrono::microseconds(microseconds));
      });
    } catch (const vnpu::Error& e) {
      throw_runtime_error(e);
    }
  });
  m.def("_npu_device_type", [] { return static_cast<int>(c10::DeviceType::PrivateUse1); });
  m.def("_check_stream", [](int64_t id, int64_t d) {
    const auto index = checked_device_index(d);
    NPU_CHECK_WITH(ValueError, ErrCode::kValue, id >= 0 && id <= vnpu::Device::kStreamPoolSize,
                   "Invalid NPU stream id ", id, ": npu streams have ids 0 to ", vnpu::Device::kStreamPoolSize);
    runtime_stream(c10::Stream(c10::Stream::UNSAFE, npu_device(index), id));
  });
  m.def("_set_stream", [](int64_t id, int64_t d) {
    set_current_stream(c10::Stream(c10::Stream::UNSAFE, npu_device(resolve_device_index(d)), id));
  });

  // torch.Event.elapsed_time only accepts exact torch.Event objects; the
  // torch.npu.Event subclass measures by event ids, looked up (never cast).
  m.def("_event_elapsed_time", &elapsed_time_between);

  bind_memory(m);

  // RNG.
  m.def("_default_generator", [](int64_t d) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(default_generator(resolve_device_index(d))));
  });

  // CPU fallback.
  m.def("_fallback_counts", &fallback_counts);
  m.def("_reset_fallback_counts", &reset_fallback_counts);
  m.def("_set_fallback_debug", &set_fallback_debug);
  m.def("_sync_native_counts", &sync_native_counts);
  m.def("_reset_sync_native_counts", &reset_sync_native_counts);

  m.def("_error_suffix", [](int sub, int code) {
    return error_suffix(static_cast<SubModule>(sub), static_cast<ErrCode>(code));
  });
  m.def("_set_error_rank", &set_error_rank);
}

}  // namespace torch_npu
