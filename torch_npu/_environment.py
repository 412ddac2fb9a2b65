"""The environment variables vNPU honours: one list, owned by the layers.

The runtime reads most of them (``runtime/src/environment.cpp`` holds their
list, exported as ``_C._environment_variables()``); the few that other
layers own are listed here. The README's table is generated from this list
(``python -m torch_npu._environment``) and a test keeps the two equal; the
test suite starts its subprocesses without any of them.
"""

from torch_npu import _C

# (name, default, meaning) of the variables that no C++ layer reads.
_OTHER_LAYERS = (
    ("TORCH_DEVICE_BACKEND_AUTOLOAD", "1", "PyTorch's: 0 stops `import torch` from importing torch_npu"),
    ("ASCEND_HOME_PATH", "torch_npu/_cann",
     "CANN's install folder, read by DeepSpeed and others; if unset, torch_npu points it (and "
     "`ASCEND_TOOLKIT_HOME`) at a folder holding CANN-like version files"),
    ("ATB_HOME_PATH", "torch_npu/_cann/nnal/atb",
     "NNAL's ATB folder (`include/atb/`, `lib/libatb.so`), read by MindSpeed's ATB op builders; if unset, "
     "torch_npu points it at vNPU's (docs/aclnn.md)"),
    ("VNPU_HCCL_HOST", "the host name",
     "the host identity hccl ranks compare: ranks with the same one exchange through shared memory, "
     "others over sockets (gloo), and a group over several hosts all-reduces hierarchically; `{rank}` in it stands for the "
     "rank (`host{rank}`: every rank a host of its own), `{rank//K}` for rank // K (`host{rank//2}`: hosts of 2 ranks)"),
    ("ASCEND_WORK_PATH", "unset",
     "torch_npu.profiler's: each profile's `*_ascend_pt` folder (raw data, and with "
     "`tensorboard_trace_handler()` the analysis) goes under `$ASCEND_WORK_PATH/profiling_data` unless the "
     "handler names a `dir_name` (else under the current folder)"),
    ("TORCH_NPU_WARNING_DISABLE", "0",
     "1: torch_npu.profiler prints no warnings (its `[WARNING] ... profiler.py:` lines), as in torch_npu, "
     "which also takes the deprecated name `TORCH_NPU_DISABLED_WARNING`; ranks other than 0 (`RANK`) print "
     "none either; read at each warning"),
    ("VNPU_CHECK_MODE", "0",
     "1: strict chip mode for the whole run (`torch.npu.set_check_mode(True)` at import), "
     "with its findings printed at exit (docs/strict_mode.md)"),
    ("VNPU_AUTOGRAD_DEVICE_THREADS", "0",
     "1: backward passes started from Python run their npu part on autograd's npu device thread, as on a GPU; "
     "0: on the calling thread, as `torch.autograd.set_multithreading_enabled(False)` runs them, which saves the "
     "two cross-thread wake-ups per backward pass that the virtual NPU gains nothing from "
     "(torch_npu/_backward_on_caller.py); anything else raises ValueError at import"),
    ("TORCH_NPU_SANITIZER", "unset",
     "set (to anything but 0): the NPU Sanitizer for the whole run (`torch_npu.npu._sanitizer.enable_npu_sanitizer()` "
     "at import, for the main thread): unsynchronised cross-stream accesses to a tensor, and reuse of memory freed "
     "while another stream still used it, raise `CUDASanitizerErrors` with both stack traces (docs/sanitizer.md)"),
    ("TORCH_NPU_LOGS", "unset",
     "torch_npu's TORCH_LOGS, read instead of it when set (same syntax); it also takes torch_npu's log names "
     "(`env`, `op_plugin`, `memory`, `dispatch`, `acl`, `npugraph`, ...), of which two log on vNPU: `env`, each "
     "environment variable read through `os.getenv`/`os.environ.get`, once; `op_plugin`, each operator called on "
     "npu tensors as the aclnn operator real op-plugin launches for it (`aclnnAdd EXEC_NPU_CMD with ...`, "
     "on stderr in torch_npu's layout; `+op_plugin` adds a debug line per operator)"),
    ("PERF_DUMP_CONFIG", "unset",
     "`enable:true`: each outermost module call marks a training step, and step intervals are written to "
     "`$PERF_DUMP_PATH/perf_pt_<pid>_<device>.log` as `[STEPTIME]:<start ms>,<end ms>` (torch_npu/utils/_step.py)"),
    ("PERF_DUMP_PATH", "unset", "the existing absolute folder of PERF_DUMP_CONFIG's logs (required with it)"),
    ("NPU_ASD_ENABLE", "0",
     "silent check 2.0's level (0-3, anything else raises ValueError at import); 1-3 warn that vNPU does not "
     "perform silent data corruption checks"),
    ("NPU_ASD_CONFIG", "unset",
     "silent check 3.0's settings (`enable:true,with_checksum:false,cooldown:5,...`), validated as real "
     "torch_npu does; `enable:true` warns that vNPU does not perform the checks"),
    ("TORCH_NPU_DEVICE_CAPABILITY", "unset",
     "`major.minor` (e.g. `8.0`) that `torch.npu.get_device_capability()` returns, read at each call as real "
     "torch_npu does; unset or malformed: it returns None with a warning"),
    ("TORCH_TRANSFER_TO_NPU", "0",
     "1: `import torch_npu` (or torch's autoload of it) applies `torch_npu.contrib.transfer_to_npu`, so an "
     "unchanged CUDA script runs on npu; anything but 0 or 1 raises ValueError at import"),
    ("PROF_CONFIG_PATH", "unset",
     "a folder: dynamic profiling of an unchanged training script, as `dynamic_profile.init(folder)` when the "
     "first optimizer is created and `dynamic_profile.step()` after each step of the optimizer created last; "
     "edit `<folder>/profiler_config.json` to profile (docs/profiler.md)"),
    ("MSMONITOR_USE_DAEMON", "0",
     "1 (with `PROF_CONFIG_PATH` unset): the same, configured by dynolog through msmonitor's `IPCMonitor` "
     "module, which vNPU does not bundle (without it: a warning, and no profiling)"),
    ("KINETO_USE_DAEMON", "unset", "`MSMONITOR_USE_DAEMON`'s deprecated name (warns)"),
    ("TORCHINDUCTOR_NPU_BACKEND", "default",
     "real torch_npu's Inductor code generator for npu graphs (`default`: triton-ascend; `mlir`, `dvm`, "
     "`ascendc`), also chosen per compilation by `torch.compile(options={\"npu_backend\": ...})` or "
     "`torch._inductor.config.npu_backend`, which set it while they compile; vNPU compiles every choice "
     "with Inductor's C++ backend, warning once for each name but `default` (docs/graph_mode.md)"),
    ("VNPU_SKIP_BUILD", "unset",
     "build-time only: `pip install` skips the CMake build (used by `scripts/setup.sh`, which builds first)"),
)


def variables():
    """Every variable as (name, default, meaning), in README order."""
    return [tuple(v) for v in _C._environment_variables()] + list(_OTHER_LAYERS)


def runtime_variable_names():
    """The variables that change how the virtual NPU starts."""
    return [name for name, _, _ in _C._environment_variables()]


def markdown_table() -> str:
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    rows += [f"| `{name}` | {default} | {meaning} |" for name, default, meaning in variables()]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
