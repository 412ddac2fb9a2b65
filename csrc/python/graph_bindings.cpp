// torch_npu._C bindings of NPU graphs and private memory pools
// (torch.npu.NPUGraph, graph_pool_handle, MemPool, use_mem_pool).
#include <torch/csrc/utils/pybind.h>

#include "csrc/core/npu_device.h"
#include "csrc/core/npu_mem_pool.h"
#include "csrc/graph/npu_graph.h"

namespace torch_npu {

namespace py = pybind11;

void bind_graphs(py::module& m) {
  // The GIL is released where a call may wait for streams (reset, and
  // release of a pool: queued work still reads its memory).
  py::class_<NpuGraph>(m, "_NPUGraph")
      .def(py::init<>())
      .def("capture_begin", &NpuGraph::capture_begin, py::arg("pool") = std::nullopt,
           py::arg("capture_error_mode") = "global")
      .def("capture_end", &NpuGraph::capture_end)
      .def("replay", &NpuGraph::replay)
      .def("reset", &NpuGraph::reset, py::call_guard<py::gil_scoped_release>())
      .def("pool", &NpuGraph::pool)
      .def("_num_tasks", &NpuGraph::num_tasks)
      .def("_task_names", &NpuGraph::task_names);
  m.def("_npu_isCurrentStreamCapturing", &is_current_stream_capturing);
  m.def("_graph_pool_handle", &graph_pool_handle);
  m.def("_npu_mempool_create", [](int64_t device) {
    return create_pool(resolve_device_index(device), /*for_graph=*/false);
  });
  m.def("_npu_mempool_release", &release_pool, py::call_guard<py::gil_scoped_release>());
  m.def("_npu_mempool_use_count", &pool_use_count);
  m.def("_npu_begin_allocate_to_pool", [](int64_t device, MempoolId id) {
    begin_allocate_to_pool(resolve_device_index(device), id);
  });
  m.def("_npu_end_allocate_to_pool", [](int64_t device, MempoolId id) {
    end_allocate_to_pool(resolve_device_index(device), id);
  });
}

}  // namespace torch_npu
