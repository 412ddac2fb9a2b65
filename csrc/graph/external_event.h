// torch.npu.ExternalEvent: an event a stream may wait for before anyone
// recorded it (CANN's external graph events), and that must be reset before
// it is reused. All three operations are stream tasks:
//   record(s)  sets the event when s reaches it;
//   wait(s)    makes s's later work wait until the event is set (at once if
//              it is set already);
//   reset(s)   clears it when s reaches it.
// Inside a graph capture each is captured as a task of the graph and acts on
// the event at every replay. vllm-ascend's graphs wait for one before each
// attention task group, which a task update on another stream then records
// (npu_task_group.h): the replay was queued before the update, and the wait
// orders the group's work after it.
//
// A wait that is never satisfied blocks its stream, as on the device; the
// stream's watchdog abort (HCCL's, or ASCEND_LAUNCH_BLOCKING's inline run,
// which cannot wait for a later record on the same thread) ends it with an
// error instead.
#pragma once

#include <c10/core/Stream.h>

#include <memory>

namespace torch_npu {

class ExternalEvent {
 public:
  ExternalEvent();
  void record(const c10::Stream& stream);
  void wait(const c10::Stream& stream);
  void reset(const c10::Stream& stream);
  // Whether the event is set now (the tasks before it have all run).
  bool is_set() const;

 private:
  struct State;
  static void wait_until_set(State& state);  // the wait task's body
  std::shared_ptr<State> state_;  // shared with the queued tasks
};

}  // namespace torch_npu
