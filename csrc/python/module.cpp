// torch_npu._C: the Python face of the adaptor. Thin bindings only; the
// Python package (torch_npu/) builds the user-facing API on top.
#include <torch/csrc/Generator.h>

#include <torch/csrc/utils/pybind.h>

#include "csrc/api/backend_setup.h"
#include "csrc/api/op_hook.h"
#include "csrc/api/op_log.h"
#include "csrc/core/npu_caching_allocator.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_error.h"
#include "csrc/core/npu_event.h"
#include "csrc/launch/float_status.h"
#include "csrc/launch/intra_op_thread_count.h"
#include "csrc/core/npu_generator.h"
#include "csrc/core/npu_gil.h"
#include "csrc/core/npu_hooks.h"
#include "csrc/graph/host_kernel_launch.h"
#include "csrc/launch/npu_empty.h"
#include "csrc/core/npu_stream.h"
#include "csrc/launch/cpu_allocation_scope.h"
#include "csrc/launch/cpu_fallback.h"
#include "csrc/launch/launch.h"
#include "csrc/launch/op_route.h"
#include "csrc/launch/sync_point.h"
#include "csrc/launch/sync_kernel.h"
#include <vnpu/environment.h>

namespace torch_npu {

void bind_memory(pybind11::module& m);
void bind_distributed(pybind11::module& m);
void bind_graphs(pybind11::module& m);
void bind_streams(pybind11::module& m);
void bind_strict_mode(pybind11::module& m);
void bind_sanitizer(pybind11::module& m);
void bind_op_route(pybind11::module& m);
void bind_logging(pybind11::module& m);
void bind_affinity(pybind11::module& m);
void bind_ipc(pybind11::module& m);
void bind_rpc(pybind11::module& m);

namespace {

namespace py = pybind11;


// The raw values of the variables that were set, and the parse errors.
py::dict environment_dict() {
  const vnpu::Environment& env = vnpu::environment();
  py::dict d;
  for (const auto& [name, value] : env.raw_values) d[py::str(name)] = value;
  d["errors"] = env.errors;
  return d;
}

py::list environment_variables() {
  py::list out;
  for (const vnpu::EnvironmentVariable& v : vnpu::environment_variables()) {
    out.append(py::make_tuple(v.name, v.default_value, v.meaning));
  }
  return out;
}

py::dict device_properties_dict(int64_t device) {
  const DeviceProperties p = device_properties(resolve_device_index(device));
  py::dict out;
  out["name"] = p.name;
  out["soc_version"] = p.soc_version;
  out["total_memory"] = p.total_memory;
  out["cube_core_num"] = p.cube_core_num;
  out["vector_core_num"] = p.vector_core_num;
  out["L2_cache_size"] = p.l2_cache_size;
  out["major"] = p.major;
  out["minor"] = p.minor;
  out["supports_bf16"] = p.supports_bf16;
  out["physical_id"] = p.physical_id;
  return out;
}

// Checks a training phase torch_npu.asd reports (`what` is "call_state" or
// "train_state", one of `first` or `second`), in torch_npu's words.
void check_silent_check_phase(const py::object& state, const char* what, const char* first, const char* second) {
  NPU_CHECK(py::isinstance<py::str>(state), "invalid value of ", what, ", ", what, " must string");
  const std::string value = state.cast<std::string>();
  NPU_CHECK(value == first || value == second, "invalid value of ", what, ", expected one of `", first, "`, `",
            second, "`");
}

py::tuple stream_tuple(const c10::Stream& s) {
  return py::make_tuple(s.id(), static_cast<int>(s.device_index()), static_cast<int>(s.device_type()));
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "vNPU: torch_npu for a virtual Ascend NPU (C++ adaptor)";

  m.def("_init", [] { return set_up_backend(default_non_native_ops()); });
  m.def("_environment", &environment_dict);
  m.def("_environment_variables", &environment_variables);

  // Devices.
  m.def("_device_count", [] { return static_cast<int>(device_count()); });
  // Real torch_npu's name for the same count (its tests compare it with torch.npu.device_count()).
  m.def("_npu_getDeviceCount", [] { return static_cast<int>(device_count()); });
  m.def("_init_error", [] { return device_init_error(); });
  // Each under vNPU's name and real torch_npu's (its own Python and tests call the latter).
  const auto get_device = [] { return static_cast<int>(current_device()); };
  const auto set_device = [](int64_t d) { set_current_device(checked_device_index(d)); };
  m.def("_current_device", get_device);
  m.def("_npu_getDevice", get_device);
  m.def("_npu_getLocalDevice", get_device);
  m.def("_set_device", set_device);
  m.def("_npu_setDevice", set_device);
  m.def("_check_device", [](int64_t d) { checked_device_index(d); });
  m.def("_is_initialized", [] { return is_initialized(); });
  // Whether the device's context exists (first used); real torch_npu's name is the second.
  const auto was_used = [](int64_t d) { return device_was_used(checked_device_index(d)); };
  m.def("_device_was_used", was_used);
  m.def("_npu_hasPrimaryContext", was_used);
  m.def("_device_busy_ns", [](int64_t d) { return device_busy_ns(checked_device_index(d)); });
  m.def("_is_in_bad_fork", [] { return is_in_bad_fork(); });
  m.def("_lazy_init", [] {
    check_not_forked();
    if (device_count() > 0) mark_initialized();
  });
  m.def("_synchronize", [](int64_t d) {
    py::gil_scoped_release no_gil;
    synchronize_device(d < 0 ? -1 : resolve_device_index(d));
  });
  m.def("_device_properties", &device_properties_dict);
  // Real torch_npu's SocVersion number of the chip (tests compare it, e.g. >= 260 for Ascend950).
  // Note [Saturation mode's float status] (csrc/launch/float_status.h)
  m.def("_npu_is_support_inf_nan", [] { return !saturation_mode(); });
  m.def("_npu_read_float_status", [](const at::Tensor& out, bool clear) { read_float_status(out, clear); });
  // Note [Deterministic level 2] (csrc/launch/intra_op_thread_count.h)
  m.def("_npu_set_deterministic_level", &set_deterministic_level);
  m.def("_npu_get_deterministic_level", [] { return deterministic_level(); });
  // The threads kernel teams are chosen from (VNPU_HOST_CORES or torch.get_num_threads()), for Inductor's
  // npu settings (torch_npu/_inductor/retarget.py).
  m.def("_intra_op_max_threads", [] { return calling_thread_intra_op_max_threads(); });
  m.def("_npu_get_soc_version", [] { return device_properties(resolve_device_index(-1)).soc_version; });
  m.def("_utilization", [](int64_t d) { return device_utilization(resolve_device_index(d)); });
  m.def("_mem_get_info", [](int64_t d) {
    const auto [free, total] = device_memory_info(resolve_device_index(d));
    return py::make_tuple(free, total);
  });

  // Streams (as (stream_id, device_index, device_type) for torch.Stream).
  // Also under real torch_npu's names (_npu_get*Stream).
  const auto current = [](int64_t d) { return stream_tuple(current_stream(resolve_device_index(d))); };
  const auto default_ = [](int64_t d) { return stream_tuple(default_stream(resolve_device_index(d))); };
  m.def("_current_stream", current);
  m.def("_npu_getCurrentStream", current);
  m.def("_default_stream", default_);
  m.def("_npu_getDefaultStream", default_);
  m.def("_npu_synchronize", [] {
    py::gil_scoped_release no_gil;
    synchronize_device(current_device());
  });
  // Every virtual NPU of the process reads every other's memory (one host).
  m.def("_npu_canDeviceAccessPeer", [](int64_t d, int64_t peer) {
    checked_device_index(d);
    checked_device_index(peer);
    return true;
  });
  // The current stream's aclrtStream handle (Stream.npu_stream), as real
  // torch_npu's Inductor glue asks for it; NoWait: the same here (no
  // initialisation to wait for once a device is in use).
  const auto raw_stream = [](int64_t d) {
    return reinterpret_cast<uintptr_t>(&runtime_stream(current_stream(resolve_device_index(d))));
  };
  m.def("_npu_getCurrentRawStream", raw_stream);
  m.def("_npu_getCurrentRawStreamNoWait", raw_stream);
  // torch.npu._sleep: like torch.cuda._sleep, keeps the current stream busy
  // for a while (tests of stream ordering and concurrency).
  m.def("_set_sync_debug_mode", &set_sync_debug_mode);
  m.def("_get_sync_debug_mode", &sync_debug_mode);
  m.def("_sleep", &sleep_on_current_stream);
  // The allocation fast path of compiled graphs (as Inductor's empty_strided_cpu).
  m.def(
      "_empty_strided_npu",
      [](std::vector<int64_t> size, std::vector<int64_t> stride, at::ScalarType dtype, int64_t device) {
        const c10::DeviceIndex index = device < 0 ? current_device() : checked_device_index(device);
        return empty_npu(size, stride, at::TensorOptions().dtype(dtype), index);
      },
      py::arg("size"), py::arg("stride"), py::arg("dtype"), py::arg("device") = -1);
  // Graph mode: where Inductor's npu kernel bindings find their launcher.
  m.def("_host_kernel_launcher_address", &host_kernel_launcher_address);
  m.def("_npu_device_type", [] { return static_cast<int>(c10::DeviceType::PrivateUse1); });
  // Real torch_npu answers 2 when CANN has aclnnSilentCheck (8.0.RC3 and
  // later, which vNPU's reported CANN 8.0.0 is): its register_asd_hook and
  // set_asd_loss_scale, the 1.0 checks, then do nothing
  // (torch_npu/utils/_asd_detector.py).
  m.def("_get_silent_check_version", [] { return 2; });
  // The training phase torch_npu.asd reports for silent check 2.0 (its
  // collectives check a source's gradients only in a training backward).
  // vNPU performs no silent checks (torch_npu/asd/asd.py), so nothing reads
  // the phase: it is validated in torch_npu's words and not kept.
  m.def("_npu_set_call_state",
        [](const py::object& state) { check_silent_check_phase(state, "call_state", "forward", "backward"); });
  m.def("_npu_set_module_train_state",
        [](const py::object& state) { check_silent_check_phase(state, "train_state", "train", "infer"); });
  m.def("_check_stream", [](int64_t id, int64_t d) { check_stream_id(id, checked_device_index(d)); });
  // Test utility: holds the current stream at a gate until open() (or a
  // minute passes, so a failing test cannot hang the process). Lets tests
  // order streams with certainty instead of sleeping and hoping.
  py::class_<StreamGate>(m, "_StreamGate")
      .def(py::init<>())
      .def("open", &StreamGate::open);
  m.def("_set_stream", [](int64_t id, int64_t d) {
    set_current_stream(c10::Stream(c10::Stream::UNSAFE, npu_device(resolve_device_index(d)), id));
  });

  // torch.Event.elapsed_time only accepts exact torch.Event objects; the
  // torch.npu.Event subclass measures by event ids, looked up (never cast).
  m.def("_event_elapsed_time", &elapsed_time_between);
  m.def("_event_recorded_time", &recorded_time_of, py::call_guard<py::gil_scoped_release>());

  bind_memory(m);
  bind_distributed(m);
  bind_graphs(m);
  bind_streams(m);
  bind_strict_mode(m);
  bind_sanitizer(m);
  bind_op_route(m);
  bind_logging(m);
  bind_affinity(m);
  bind_ipc(m);
  bind_rpc(m);

  // RNG.
  m.def("_default_generator", [](int64_t d) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(default_generator(resolve_device_index(d))));
  });

  // CPU fallback.
  m.def("_fallback_counts", &fallback_counts);
  m.def("_reset_fallback_counts", &reset_fallback_counts);
  m.def("_set_fallback_debug", &set_fallback_debug);
  m.def("_set_op_hooks_enabled", &set_op_hooks_enabled);
  m.def("_aclnn_name_of", &aclnn_name_of);
  m.def("_sync_native_counts", &sync_native_counts);
  m.def("_reset_sync_native_counts", &reset_sync_native_counts);

}

}  // namespace torch_npu
