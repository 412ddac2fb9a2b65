"""torch_npu.profiler.dynamic_profile: profile a running training job by
editing a JSON file, without restarting it.

    from torch_npu.profiler import dynamic_profile as dp
    dp.init("./dyn_cfg")          # writes ./dyn_cfg/profiler_config.json if missing
    for batch in loader:
        train_step(batch)
        dp.step()                 # reads the file when it changed

Setting "start_step" (>= the current step) in profiler_config.json profiles
"active" steps from that step on, written under "prof_dir" as with
tensorboard_trace_handler; then the file is watched again.
"""

import json
import os
import pathlib
import warnings

from torch_npu.profiler.experimental_config import _ExperimentalConfig

__all__ = ["init", "start", "step", "set_state"]

CONFIG_NAME = "profiler_config.json"
DEFAULT_CONFIG = {
    "activities": ["CPU", "NPU"], "prof_dir": "./", "analyse": True, "record_shapes": False,
    "profile_memory": False, "with_stack": False, "with_flops": False, "with_modules": False, "active": 1,
    "warmup": 0, "start_step": -1, "is_rank": False, "rank_list": [],
    "experimental_config": {"profiler_level": "Level0", "aic_metrics": "ACL_AICORE_NONE", "export_type": "text"},
}


class _State:
    path = None
    mtime = None
    step = 0
    config = None
    prof = None
    stop_at = None


def _read():
    try:
        config = json.loads((_State.path / CONFIG_NAME).read_text())
    except (OSError, ValueError) as e:
        warnings.warn(f"dynamic_profile: cannot read {_State.path / CONFIG_NAME}: {e}; the profiler stays off")
        return None
    merged = dict(DEFAULT_CONFIG)
    merged.update(config)
    return merged


def init(path):
    """Watches ``path``/profiler_config.json (written with defaults if missing)."""
    _State.path = pathlib.Path(path)
    _State.path.mkdir(parents=True, exist_ok=True)
    config_file = _State.path / CONFIG_NAME
    if not config_file.exists():
        config_file.write_text(json.dumps(DEFAULT_CONFIG, indent=1))
    _State.mtime = config_file.stat().st_mtime_ns
    _State.step = 0


def _start(config):
    from torch_npu.profiler.profiler import ProfilerActivity, profile, tensorboard_trace_handler
    activities = [ProfilerActivity[a] for a in config["activities"] if a in ("CPU", "NPU")]
    experimental = config.get("experimental_config") or {}
    exp = _ExperimentalConfig(**{k: v for k, v in experimental.items()
                                 if k in ("profiler_level", "aic_metrics", "export_type")})
    _State.prof = profile(activities=activities, record_shapes=config["record_shapes"],
                          profile_memory=config["profile_memory"], with_stack=config["with_stack"],
                          with_flops=config["with_flops"], with_modules=config["with_modules"],
                          experimental_config=exp,
                          on_trace_ready=tensorboard_trace_handler(config["prof_dir"], analyse_flag=config["analyse"]))
    _State.prof.start()
    _State.stop_at = _State.step + max(1, int(config["active"]))


def start(config_path=None):
    """Profiles from now on with the file's (or the default) settings."""
    config = dict(DEFAULT_CONFIG)
    if config_path is not None:
        config.update(json.loads(pathlib.Path(config_path).read_text()))
    _start(config)


def step():
    """Call once per training step."""
    _State.step += 1
    if _State.prof is not None:
        if _State.step >= _State.stop_at:
            _State.prof.stop()
            _State.prof = None
        return
    if _State.path is None:
        return
    config_file = _State.path / CONFIG_NAME
    try:
        mtime = config_file.stat().st_mtime_ns
    except OSError:
        return
    if mtime == _State.mtime:
        return
    _State.mtime = mtime
    config = _read()
    if config is None:
        return
    rank = int(os.environ.get("RANK", 0))
    if config["is_rank"] and rank not in config["rank_list"]:
        return
    if int(config["start_step"]) >= 0 and int(config["start_step"]) <= _State.step:
        _start(config)


def set_state(state_step: dict):
    """Sets the step counter from ``{"cur_step": N}`` (a job resumed from a
    checkpoint at step N), so that "start_step" keeps naming training steps.
    Anything else warns and changes nothing, as in torch_npu."""
    if not isinstance(state_step, dict):
        warnings.warn("Dynamic profiler state_step must be dict.")
        return
    cur_step = state_step.get("cur_step", 0)
    if not isinstance(cur_step, int) or isinstance(cur_step, bool) or cur_step < 0:
        warnings.warn("Dynamic profiler cur_step must be a non-negative integer.")
        return
    _State.step = cur_step
