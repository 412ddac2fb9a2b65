// torch_npu._C bindings of NPU graphs and private memory pools
// (torch.npu.NPUGraph, graph_pool_handle, MemPool, use_mem_pool), task groups
// and external events.
#include <torch/csrc/utils/pybind.h>

#include "csrc/core/npu_capture.h"
#include "csrc/core/npu_device.h"
#include "csrc/core/npu_mem_pool.h"
#include "csrc/core/npu_pluggable_allocator.h"
#include "csrc/graph/accelerator_graph.h"
#include "csrc/graph/external_event.h"
#include "csrc/graph/npu_graph.h"
#include "csrc/graph/npu_task_group.h"
#include "csrc/python/stream_object.h"

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
      .def("_task_names", &NpuGraph::task_names)
      .def("begin_capture_to_if_node", &NpuGraph::begin_capture_to_if_node)
      .def("end_capture_to_conditional_node", &NpuGraph::end_capture_to_conditional_node);
  m.def("_register_accelerator_graph", &register_accelerator_graph);  // torch.accelerator.Graph
  m.def("_npu_isCurrentStreamCapturing", &is_current_stream_capturing);
  m.def("_graph_pool_handle", &graph_pool_handle);
  m.def("_npu_mempool_create", [](int64_t device, std::shared_ptr<PluggableAllocator> segments, bool no_split,
                                  bool use_on_oom) {
    return create_pool(resolve_device_index(device), /*for_graph=*/false, std::move(segments), no_split, use_on_oom);
  }, py::arg("device"), py::arg("allocator") = nullptr, py::arg("no_split") = false, py::arg("use_on_oom") = false);
  m.def("_npu_mempool_release", &release_pool, py::call_guard<py::gil_scoped_release>());
  m.def("_npu_mempool_use_count", &pool_use_count);
  m.def("_npu_mempool_device", [](MempoolId id) { return static_cast<int>(pool_device(id)); });
  // Task groups (npu_task_group.h). The handle is opaque, as real
  // torch_npu's (its task_group attribute is the group's index here).
  py::class_<TaskGroupHandle>(m, "_NPUTaskGroupHandle")
      .def_property_readonly("task_group", [](const TaskGroupHandle& h) { return h.index; })
      .def("__repr__", [](const TaskGroupHandle& h) {
        return "<_NPUTaskGroupHandle task_group=" + std::to_string(h.index) +
               (h.graph.expired() ? " (graph reset)>" : ">");
      });
  m.def("_graph_task_group_begin", [](const py::object& stream) {
    graph_task_group_begin(stream_of_object(stream, "graph_task_group_begin"));
  }, py::arg("stream"));
  m.def("_graph_task_group_end", [](const py::object& stream) {
    return graph_task_group_end(stream_of_object(stream, "graph_task_group_end"));
  }, py::arg("stream"));
  m.def("_graph_task_update_begin", [](const py::object& stream, const TaskGroupHandle& handle) {
    graph_task_update_begin(stream_of_object(stream, "graph_task_update_begin"), handle);
  }, py::arg("stream"), py::arg("handle"));
  m.def("_graph_task_update_end", [](const py::object& stream) {
    graph_task_update_end(stream_of_object(stream, "graph_task_update_end"));
  }, py::arg("stream"));
  py::class_<ExternalEvent>(m, "_ExternalEvent")
      .def(py::init<>())
      .def("record", [](ExternalEvent& e, const py::object& s) { e.record(stream_of_object(s, "ExternalEvent.record")); })
      .def("wait", [](ExternalEvent& e, const py::object& s) { e.wait(stream_of_object(s, "ExternalEvent.wait")); })
      .def("reset", [](ExternalEvent& e, const py::object& s) { e.reset(stream_of_object(s, "ExternalEvent.reset")); })
      .def("_is_set", &ExternalEvent::is_set);
  m.def("_npu_set_host_constants_capturable", &set_host_constants_capturable);
  m.def("_npu_begin_allocate_to_pool", [](int64_t device, MempoolId id) {
    begin_allocate_to_pool(resolve_device_index(device), id);
  });
  m.def("_npu_end_allocate_to_pool", [](int64_t device, MempoolId id) {
    end_allocate_to_pool(resolve_device_index(device), id);
  });
}

}  // namespace torch_npu
