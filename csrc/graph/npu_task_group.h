// Task groups of NPU graphs (torch.npu.graph_task_group_begin/end,
// graph_task_update_begin/end; CANN's aclmdlRICaptureTaskGrp* and
// aclmdlRICaptureTaskUpdate*): a part of a captured graph whose work is
// re-recorded later with new arguments, without recapturing the graph.
// vllm-ascend's full-graph decoding captures each attention kernel in a
// group and, every step, updates it with that step's sequence lengths.
//
//   capture:  graph_task_group_begin(s); <ops on s>; h = graph_task_group_end(s)
//   update:   graph_task_update_begin(u, h); <ops on u>; graph_task_update_end(u)
//
// The ops between update_begin and update_end are captured on the update
// stream (nothing runs), and update_end queues on it the swap of that work
// into the group: the swap is stream-ordered, so an event recorded on the
// update stream afterwards (vllm-ascend's ExternalEvent, which the graph
// waits for before the group) tells replays the new work is in. A replay
// that reaches the group runs the version current at that moment.
//
// Memory: what an update's ops allocate comes from a private pool of the
// group's (one per group, made at its first update, released when the graph
// is reset). Not the graph's own pool: a block free in it after the capture
// may still hold, at the group's point of a replay, a value another part of
// the graph computed before the group and reads after it.
//
// Unlike the device, vNPU does not require an update to launch the same
// kernels as the group's capture: any capturable work is accepted.
#pragma once

#include <c10/core/Stream.h>

#include <cstddef>
#include <memory>

namespace vnpu {
class Graph;
}  // namespace vnpu

namespace torch_npu {

// torch_npu._C._NPUTaskGroupHandle: which group of which graph.
struct TaskGroupHandle {
  std::weak_ptr<vnpu::Graph> graph;
  std::size_t index = 0;
  c10::DeviceIndex device = -1;
};

void graph_task_group_begin(const c10::Stream& stream);
TaskGroupHandle graph_task_group_end(const c10::Stream& stream);
void graph_task_update_begin(const c10::Stream& stream, const TaskGroupHandle& handle);
void graph_task_update_end(const c10::Stream& stream);

// Releases the private pools of `graph`'s task groups (NpuGraph::reset,
// after the graph's replays finished).
void release_task_group_pools(const vnpu::Graph* graph);

}  // namespace torch_npu
