"""What a profile does when its schedule moves from one action to the next.

``transit_action(prev, current)`` runs the steps of ``_ProfInterface``
(profiler_interface.py) that the change of action calls for: a recording
starts on the way into RECORD or RECORD_AND_SAVE, and every recording that
stops is finalized (its files written) at once; after RECORD_AND_SAVE the
profile's ``on_trace_ready`` gets it. ``current`` None is the profile's
stop. A schedule that leaves a recording by an unusual way (RECORD then
NONE, ...) gets torch_npu's warning, and the recording is kept; a profile
stopped in WARMUP recorded nothing, so its folder is deleted.
"""

from functools import partial

from torch_npu.profiler.analysis.prof_common_func._constant import print_warn_msg
from torch_npu.profiler.scheduler import ProfilerAction

__all__ = []

_NONE, _WARMUP, _RECORD, _SAVE = (ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD,
                                  ProfilerAction.RECORD_AND_SAVE)

# (previous action, current action) -> the steps, by name: methods of the
# profile's _ProfInterface, "trace_ready" (the on_trace_ready callback), or
# ("warn", message).
_STEPS = {
    (_NONE, _WARMUP): ["init_trace", "warmup_trace"],
    (_NONE, _RECORD): ["init_trace", "start_trace"],
    (_NONE, _SAVE): ["init_trace", "start_trace"],
    (_WARMUP, _NONE): [("warn", "Incorrect schedule: WARMUP followed by NONE"),
                       "start_trace", "stop_trace", "finalize_trace"],
    (_WARMUP, _RECORD): ["start_trace"],
    (_WARMUP, _SAVE): ["start_trace"],
    (_RECORD, _NONE): [("warn", "Incorrect schedule: RECORD followed by NONE"), "stop_trace", "finalize_trace"],
    (_RECORD, _WARMUP): [("warn", "Incorrect schedule: RECORD followed by WARMUP"), "stop_trace", "finalize_trace"],
    (_SAVE, _NONE): ["stop_trace", "finalize_trace", "trace_ready"],
    (_SAVE, _WARMUP): ["stop_trace", "finalize_trace", "trace_ready", "init_trace", "warmup_trace"],
    (_SAVE, _RECORD): ["stop_trace", "finalize_trace", "trace_ready", "init_trace", "start_trace"],
    (_SAVE, _SAVE): ["stop_trace", "finalize_trace", "trace_ready", "init_trace", "start_trace"],
    # the profile stops
    (_WARMUP, None): [("warn", "Incorrect schedule: Stop profiler while current state is WARMUP which will result "
                               "in empty parsed data."), "finalize_trace", "delete_prof_dir"],
    (_RECORD, None): [("warn", "Incorrect schedule: Stop profiler while current state is RECORD which may result "
                               "in incomplete parsed data."), "stop_trace", "finalize_trace", "trace_ready"],
    (_SAVE, None): [("warn", "Stop profiler while current state is RECORD_AND_SAVE, perhaps the scheduling cycle "
                             "has not yet completed."), "stop_trace", "finalize_trace", "trace_ready"],
}


class ProfActionController:
    def __init__(self, prof, prof_inst, on_trace_ready=None) -> None:
        self.prof = prof            # what on_trace_ready is given
        self.prof_inst = prof_inst  # the profile's _ProfInterface
        self.on_trace_ready = on_trace_ready
        self.action_map = {key: [self._step(s) for s in steps] for key, steps in _STEPS.items()}

    def transit_action(self, prev_action, current_action):
        for step in self.action_map.get((prev_action, current_action), ()):
            step()

    def _step(self, step):
        if isinstance(step, tuple):
            return partial(print_warn_msg, step[1])
        if step == "trace_ready":
            return self._trace_ready
        # looked up at each call: the interface's methods may be replaced after this controller is made
        return lambda: getattr(self.prof_inst, step)()

    def _trace_ready(self):
        if self.on_trace_ready:
            self.on_trace_ready(self.prof)
