"""torch.npu names of real torch_npu that the virtual NPU cannot provide.

Each is callable (or constructible) and raises a RuntimeError that says why,
instead of a stub that would pretend: the name exists so that code probing
for it with hasattr gets an answer and code calling it gets a reason.
"""

_REASONS = {
    "SyncLaunchStream": "the runtime cannot make the launches of one stream synchronous; set "
                        "ASCEND_LAUNCH_BLOCKING=1 before the process starts to run every npu kernel "
                        "synchronously, or call torch.npu.synchronize() after the work in question.",
    "ExternalEvent": "there are no external (runtime-created) events: the virtual NPU has no aclrtEvent to wrap; "
                     "use torch.npu.Event.",
    "graph_task_group_begin": "NPUGraph here replays recorded kernels and has no task groups to update.",
    "graph_task_group_end": "NPUGraph here replays recorded kernels and has no task groups to update.",
    "graph_task_update_begin": "NPUGraph here replays recorded kernels and has no task groups to update.",
    "graph_task_update_end": "NPUGraph here replays recorded kernels and has no task groups to update.",
    "super_kernel_scope_begin": "super kernels are fused by the Ascend graph compiler, which vNPU does not have.",
    "super_kernel_scope_end": "super kernels are fused by the Ascend graph compiler, which vNPU does not have.",
    "set_aoe": "AOE (the Ascend Optimization Engine tuner) is not part of vNPU.",
    "set_op_timeout_ms": "the virtual NPU's runtime has no operator execution timeout to set.",
}


def _raise(name):
    raise RuntimeError(f"torch.npu.{name} is not supported on vNPU: {_REASONS[name]}")


class SyncLaunchStream:
    def __init__(self, *args, **kwargs):
        _raise("SyncLaunchStream")


class ExternalEvent:
    def __init__(self, *args, **kwargs):
        _raise("ExternalEvent")


def _make(name):
    def fn(*args, **kwargs):
        _raise(name)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Not supported on vNPU: {_REASONS[name]}"
    return fn


graph_task_group_begin = _make("graph_task_group_begin")
graph_task_group_end = _make("graph_task_group_end")
graph_task_update_begin = _make("graph_task_update_begin")
graph_task_update_end = _make("graph_task_update_end")
super_kernel_scope_begin = _make("super_kernel_scope_begin")
super_kernel_scope_end = _make("super_kernel_scope_end")
set_aoe = _make("set_aoe")
set_op_timeout_ms = _make("set_op_timeout_ms")
