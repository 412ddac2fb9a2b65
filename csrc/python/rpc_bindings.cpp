// torch_npu._C._distributed_rpc: the NPU_TENSORPIPE backend's agent, under
// the name real torch_npu binds it (TensorPipeAgent), a subclass of torch's.
#include <torch/csrc/utils/pybind.h>

#include <pybind11/stl.h>

#include "csrc/distributed/npu_tensorpipe_agent.h"

namespace torch_npu {

namespace py = pybind11;

void bind_rpc(py::module& m) {
  py::module rpc_module = m.def_submodule("_distributed_rpc", "torch_npu's rpc agent");
  py::class_<NpuTensorPipeAgent, rpc::TensorPipeAgent, std::shared_ptr<NpuTensorPipeAgent>>(
      rpc_module, "TensorPipeAgent",
      "torch's TensorPipe agent for the NPU_TENSORPIPE backend: npu tensors in messages cross as CPU copies "
      "and land on the npus the options' device maps name (csrc/distributed/npu_tensorpipe_agent.h).")
      .def(py::init<const c10::intrusive_ptr<c10d::Store>&, std::string, rpc::worker_id_t, std::optional<int>,
                    rpc::TensorPipeRpcBackendOptions>(),
           py::arg("store"), py::arg("name"), py::arg("rank"), py::arg("world_size"), py::arg("rpc_backend_options"),
           py::call_guard<py::gil_scoped_release>())
      // the options as given (torch's own method returns the base agent's, which carry no npu devices)
      .def("_get_backend_options", &NpuTensorPipeAgent::npu_options, py::return_value_policy::copy,
           py::call_guard<py::gil_scoped_release>())
      .def("_npu_device_map", &NpuTensorPipeAgent::npu_device_map, py::arg("worker"),
           py::call_guard<py::gil_scoped_release>());
}

}  // namespace torch_npu
