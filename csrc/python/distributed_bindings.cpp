// torch_npu._C._distributed_c10d: ProcessGroupHCCL and its Options, as real
// torch_npu exposes them. The constructors make the transport's sockets
// (torch.distributed.ProcessGroupGloo on a prefix of the same store): the
// distributed library itself includes no gloo header and runs no Python.
#include <torch/csrc/utils/pybind.h>

#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include "csrc/core/npu_stream.h"
#include "csrc/distributed/flight_recorder.h"
#include "csrc/distributed/process_group_hccl.h"
#include "csrc/distributed/watchdog.h"

namespace torch_npu {

namespace py = pybind11;

namespace {

// The id of the group's communication stream on `device` (no index: the current device).
int64_t comm_stream_id(ProcessGroupHCCL& pg, const c10::Device& device) {
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1, "expected an npu device, got ", device);
  return pg.comm_stream(device.has_index() ? device.index() : current_stream(-1).device_index()).id();
}

using Options = ProcessGroupHCCL::Options;

// A ProcessGroupGloo over `prefix` of the group's store.
c10::intrusive_ptr<c10d::Backend> make_sockets(const c10::intrusive_ptr<c10d::Store>& store,
                                               const std::string& prefix, int rank, int size,
                                               std::chrono::milliseconds timeout) {
  py::module dist = py::module::import("torch.distributed");
  py::object prefixed = dist.attr("PrefixStore")(prefix, py::cast(store));
  py::object gloo = dist.attr("ProcessGroupGloo")(prefixed, rank, size, timeout);
  return gloo.cast<c10::intrusive_ptr<c10d::Backend>>();
}

c10::intrusive_ptr<ProcessGroupHCCL> make_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                c10::intrusive_ptr<Options> options) {
  TORCH_CHECK(size > 0 && rank >= 0 && rank < size, "ProcessGroupHCCL: rank ", rank, " is not in a group of size ",
              size);
  return c10::make_intrusive<ProcessGroupHCCL>(
      store, rank, size, options,
      [&](const std::string& prefix, int sockets_rank, int sockets_size, std::chrono::milliseconds timeout) {
        return make_sockets(store, prefix, sockets_rank, sockets_size, timeout);
      });
}

// hccl_config takes ints and strings; which key needs which is checked when
// a group is made (read_hccl_config), in torch_npu's words.
HcclConfigMap hccl_config_from(const py::dict& config) {
  HcclConfigMap out;
  for (const auto& [key, value] : config) {
    TORCH_CHECK_TYPE(py::isinstance<py::str>(key), "hccl_config keys are strings, got ",
                     std::string(py::repr(key)));
    const std::string name = py::str(key);
    if (py::isinstance<py::str>(value)) {
      out[name] = value.cast<std::string>();
    } else if (py::isinstance<py::int_>(value)) {
      try {
        out[name] = value.cast<int64_t>();
      } catch (const py::cast_error&) {
        TORCH_CHECK_TYPE(false, "Value of hccl_config's ", name, " (", std::string(py::repr(value)),
                         ") does not fit in 64 bits.");
      }
    } else {
      TORCH_CHECK_TYPE(false, "Value of hccl_config's ", name, " should be an int or a string, got ",
                       std::string(py::str(py::type::handle_of(value).attr("__name__"))), ".");
    }
  }
  return out;
}

// The Python half of a timeout dump (flight_recorder.h): every thread's
// stack, written by torch_npu/distributed/_py_traceback.py.
void dump_python_stacks(const std::string& path) {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
  py::gil_scoped_acquire gil;
  try {
    py::module::import("torch_npu.distributed._py_traceback").attr("write_python_stacks")(path);
  } catch (py::error_already_set& e) {
    std::fprintf(stderr, "Could not write the Python stacks to %s: %s\n", path.c_str(), e.what());
  }
}

}  // namespace

void bind_distributed(py::module& m) {
  py::module::import("torch.distributed");  // registers c10d's Backend and Store types
  py::module dist = m.def_submodule("_distributed_c10d", "torch_npu's c10d backends");

  auto group = py::class_<ProcessGroupHCCL, c10d::Backend, c10::intrusive_ptr<ProcessGroupHCCL>>(dist,
                                                                                                   "ProcessGroupHCCL");
  py::class_<Options, c10d::Backend::Options, c10::intrusive_ptr<Options>>(group, "Options")
      .def(py::init<bool>(), py::arg("is_high_priority_stream") = false)
      .def_readwrite("is_high_priority_stream", &Options::is_high_priority_stream)
      .def_readwrite("group_id", &Options::group_id)
      .def_readwrite("_host_id", &Options::host_id)
      .def_property(
          "op_timeout", [](const Options& o) { return o.timeout; },
          [](Options& o, std::chrono::milliseconds t) { o.timeout = t; })
      .def_property(
          "hccl_config",
          [](const Options& o) {
            py::dict d;
            for (const auto& [k, v] : o.hccl_config) {
              d[py::str(k)] = std::visit([](const auto& x) { return py::cast(x); }, v);
            }
            return d;
          },
          [](Options& o, const py::dict& config) { o.hccl_config = hccl_config_from(config); });

  group
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       c10::intrusive_ptr<Options> options) { return make_group(store, rank, size, options); }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("options"))
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             auto options = Options::create();
             options->timeout = timeout;
             return make_group(store, rank, size, options);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"),
           py::arg("timeout") = std::chrono::milliseconds(30 * 60 * 1000))
      .def("_group_start", &ProcessGroupHCCL::group_start, py::call_guard<py::gil_scoped_release>())
      .def("_group_end", &ProcessGroupHCCL::group_end, py::call_guard<py::gil_scoped_release>())
      .def("batch_isend_irecv", &ProcessGroupHCCL::batch_isend_irecv, py::arg("op_type"), py::arg("tensors"),
           py::arg("remote_rank_list"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("options", &ProcessGroupHCCL::options)
      .def_property_readonly("_uses_shared_memory", &ProcessGroupHCCL::uses_shared_memory)
      .def_property_readonly("_uses_zero_copy", &ProcessGroupHCCL::uses_zero_copy)
      .def_property_readonly("_transport", &ProcessGroupHCCL::transport_name)
      .def_property_readonly("_aborted", &ProcessGroupHCCL::aborted)
      // init_comm=False asks real torch_npu not to create a communicator that
      // does not exist yet; vNPU's exists from the group's construction.
      .def("get_hccl_comm_name",
           [](ProcessGroupHCCL& pg, int64_t rankid, bool /*init_comm*/) { return pg.hccl_comm_name(rankid); },
           py::arg("rankid"), py::kw_only(), py::arg("init_comm") = true)
      .def("_set_hccl_comm_name", &ProcessGroupHCCL::set_hccl_comm_name, py::arg("hccl_comm_name"))
      // The stream id (torch.npu.Stream(stream_id=...)) of the group's
      // communication stream on a device, made on first use. Point-to-point
      // operations start on that stream too, so the p2p id is the same.
      .def("get_coll_stream_id",
           [](ProcessGroupHCCL& pg, const c10::Device& device) { return comm_stream_id(pg, device); },
           py::arg("device"))
      // -1 before any send or recv with `peer`, as in torch_npu; batched or
      // not, the operations start on the communication stream.
      .def("get_p2p_stream_id",
           [](ProcessGroupHCCL& pg, const c10::Device& device, int64_t peer, int64_t /*is_batched*/) -> int64_t {
             if (!pg.exchanged_with(static_cast<int>(peer))) return -1;
             return comm_stream_id(pg, device);
           },
           py::arg("device"), py::arg("peer"), py::arg("is_batched") = 0)
      .def("_get_stream_id",
           [](ProcessGroupHCCL& pg, bool /*p2p*/, int64_t /*peer*/) {
             return comm_stream_id(pg, c10::Device(c10::DeviceType::PrivateUse1));
           },
           py::arg("p2p") = false, py::arg("peer") = -1);

  set_python_stack_dumper(&dump_python_stacks);
  // As real torch_npu: the flight recorder's trace (torch's pickle format), or JSON.
  dist.def(
      "_dump_hccl_trace",
      [](std::optional<bool> include_collectives, std::optional<bool> include_stack_traces,
         std::optional<bool> only_active) {
        std::string trace;
        {
          py::gil_scoped_release no_gil;  // symbolizing takes it when it needs it
          trace = FlightRecorder::instance().dump_pickle(include_collectives.value_or(true),
                                                         include_stack_traces.value_or(true),
                                                         only_active.value_or(false));
        }
        return py::bytes(trace);
      },
      py::arg("includeCollectives") = std::nullopt, py::arg("includeStackTraces") = std::nullopt,
      py::arg("onlyActive") = std::nullopt);
  dist.def(
      "_dump_hccl_trace_json",
      [](std::optional<bool> include_collectives, std::optional<bool> only_active) {
        return FlightRecorder::instance().dump_json(include_collectives.value_or(true), only_active.value_or(false));
      },
      py::arg("includeCollectives") = std::nullopt, py::arg("onlyActive") = std::nullopt);
  dist.def("_set_watchdog_limits_for_testing", &set_watchdog_limits_for_testing, py::arg("dispatch_ms"),
           py::arg("exec_ms"));
}

}  // namespace torch_npu
