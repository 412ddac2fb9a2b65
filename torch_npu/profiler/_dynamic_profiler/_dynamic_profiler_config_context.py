"""ConfigContext: one dynamic-profiling config, parsed and checked.

A config is ``profiler_config.json``'s dict (``DynamicProfilerShareMemory.JSON_DATA``
shows every key), or in dynolog mode the ``KEY=value`` strings dynolog sends
(``PROFILE_ACTIVITIES=CPU,NPU``, ``ACTIVITIES_ITERATIONS=2``, ...), which are
first turned into the same dict. A value of the wrong type or range never
raises: it is reset to its default, and the reset is logged and kept in
``problems`` (the dynamic profile prints them when it applies the config).

The profile arguments are attributes (``record_shapes``, ``with_stack``, ...,
``experimental_config``, ``prof_path``); the schedule's are methods
(``active()``, ``warmup()``, ``start_step()``), as real torch_npu has them.
"""

import json

from torch_npu.profiler.experimental_config import AiCMetrics, ProfilerLevel, _ExperimentalConfig
from torch_npu.profiler.profiler import ProfilerActivity

from ._dynamic_profiler_utils import DynamicProfilerUtils

__all__ = []

_PROFILE_FLAGS = ("record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules")

# (key in profiler_config.json, dynolog's key, how dynolog's text converts)
_DYNO_FIELDS = (
    ("activities", "PROFILE_ACTIVITIES", "list"),
    ("prof_dir", "ACTIVITIES_LOG_FILE", "str"),
    ("analyse", "PROFILE_ANALYSE", "bool"),
    ("async_mode", "PROFILE_ASYNC_MODE", "bool"),
    ("record_shapes", "PROFILE_RECORD_SHAPES", "bool"),
    ("profile_memory", "PROFILE_PROFILE_MEMORY", "bool"),
    ("with_stack", "PROFILE_WITH_STACK", "bool"),
    ("with_flops", "PROFILE_WITH_FLOPS", "bool"),
    ("with_modules", "PROFILE_WITH_MODULES", "bool"),
    ("active", "ACTIVITIES_ITERATIONS", "int"),
    ("warmup", "WARMUP_ITERATIONS", "int"),
    ("start_step", "PROFILE_START_STEP", "int"),
    ("is_rank", "PROFILE_IS_RANK", "bool"),
    ("rank_list", "PROFILE_RANK_LIST", "ranks"),
)
# the same for experimental_config's keys
_DYNO_EXPERIMENTAL_FIELDS = (
    ("profiler_level", "PROFILE_PROFILER_LEVEL", "str"),
    ("aic_metrics", "PROFILE_AIC_METRICS", "str"),
    ("l2_cache", "PROFILE_L2_CACHE", "bool"),
    ("op_attr", "PROFILE_OP_ATTR", "bool"),
    ("gc_detect_threshold", "PROFILE_GC_DETECT_THRESHOLD", "float"),
    ("data_simplification", "PROFILE_DATA_SIMPLIFICATION", "bool"),
    ("export_type", "PROFILE_EXPORT_TYPE", "lower"),
    ("msprof_tx", "PROFILE_MSPROF_TX", "bool"),
    ("mstx", "PROFILE_MSTX", "bool"),
    ("host_sys", "PROFILE_HOST_SYS", "list"),
    ("mstx_domain_include", "PROFILE_MSTX_DOMAIN_INCLUDE", "list"),
    ("mstx_domain_exclude", "PROFILE_MSTX_DOMAIN_EXCLUDE", "list"),
    ("sys_io", "PROFILE_SYS_IO", "bool"),
    ("sys_interconnection", "PROFILE_SYS_INTERCONNECTION", "bool"),
)
_EXPERIMENTAL_KEYS = frozenset(key for key, _, _ in _DYNO_EXPERIMENTAL_FIELDS) | {"record_op_args"}
_LIST_EXPERIMENTAL_KEYS = ("host_sys", "mstx_domain_include", "mstx_domain_exclude")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


class ConfigContext:
    DEFAULT_ACTIVE_NUM = 1
    DEFAULT_START_STEP = 0
    INSTANT_START_STEP = -1  # start_step -1: at the next step
    DEFAULT_WARMUP = 0
    DEADLINE_PROF_DIR = "./"
    BOOL_MAP = {"true": True, "false": False}

    def __init__(self, json_data: dict):
        self.activity_set = set()
        self.prof_path = self.DEADLINE_PROF_DIR
        self._analyse = False
        self._async_mode = False
        self.record_shapes = False
        self.profile_memory = False
        self.with_stack = False
        self.with_flops = False
        self.with_modules = False
        self.is_rank = False
        self._rank_set = set()
        self.experimental_config = None
        self._active = self.DEFAULT_ACTIVE_NUM
        self._warmup = self.DEFAULT_WARMUP
        self._start_step = self.DEFAULT_START_STEP
        self._meta_data = {}
        self.is_valid = False
        self._is_dyno = DynamicProfilerUtils.is_dyno_model()
        self._is_dyno_monitor = False
        self._rank_id = DynamicProfilerUtils.get_rank_id()
        self.problems = []
        self.parse(json_data)

    # -- parsing -------------------------------------------------------------------------------------------------

    def parse(self, json_data: dict):
        if not isinstance(json_data, dict):
            self._problem(f"The config must be a JSON object, got {type(json_data).__name__}; it is ignored.")
            return
        self.is_valid = json_data.get("is_valid", False) is True
        self._is_dyno_monitor = "NPU_MONITOR_START" in json_data  # for msmonitor's npu monitor, not the profiler
        if self._is_dyno_monitor:
            return
        if self._is_dyno:
            json_data = self._from_dyno(json_data)
        self._parse_activities(json_data.get("activities"))
        prof_dir = json_data.get("prof_dir", self.DEADLINE_PROF_DIR)
        self.prof_path = prof_dir if isinstance(prof_dir, str) and prof_dir else self._reset("prof_dir", "./")
        self._analyse = self._bool(json_data, "analyse")
        self._async_mode = self._bool(json_data, "async_mode")
        for key in _PROFILE_FLAGS:
            setattr(self, key, self._bool(json_data, key))
        if self._async_mode and not self._analyse:
            DynamicProfilerUtils.out_log("When analyse is False, async_mode will not take effect!",
                                         DynamicProfilerUtils.LoggerLevelEnum.WARNING)
        self._active = self._int(json_data, "active", self.DEFAULT_ACTIVE_NUM, 1)
        self._warmup = self._int(json_data, "warmup", self.DEFAULT_WARMUP, 0)
        self._start_step = self._int(json_data, "start_step", self.DEFAULT_START_STEP, self.INSTANT_START_STEP)
        DynamicProfilerUtils.out_log(f"Start step will be set to {self._start_step}.",
                                     DynamicProfilerUtils.LoggerLevelEnum.INFO)
        metadata = json_data.get("metadata", {})
        self._meta_data = metadata if isinstance(metadata, dict) else self._reset("metadata", {})
        self._parse_experimental_config(json_data.get("experimental_config"))
        self._parse_ranks(json_data)

    def _from_dyno(self, dyno: dict) -> dict:
        """dynolog's strings as profiler_config.json's values (text that does
        not convert stays text, and is reset as any wrong value is)."""
        data = {key: self._dyno_value(kind, dyno[dyno_key])
                for key, dyno_key, kind in _DYNO_FIELDS if dyno.get(dyno_key) is not None}
        data["experimental_config"] = {key: self._dyno_value(kind, dyno[dyno_key])
                                       for key, dyno_key, kind in _DYNO_EXPERIMENTAL_FIELDS
                                       if dyno.get(dyno_key) is not None}
        return data

    def _dyno_value(self, kind, text):
        text = str(text)
        if kind == "bool":
            return self.BOOL_MAP.get(text.lower(), text)
        if kind == "int":
            try:
                return int(text)
            except ValueError:
                return text
        if kind == "float":
            try:
                return None if text == "None" else float(text)
            except ValueError:
                return text
        if kind == "list":
            return DynamicProfilerUtils.parse_str_params_to_list(text)
        if kind == "ranks":
            return [int(r) for r in DynamicProfilerUtils.parse_str_params_to_list(text) if r.isdigit()]
        return text.lower() if kind == "lower" else text

    def _parse_activities(self, activities):
        if activities is None:
            self.activity_set = {ProfilerActivity.CPU, ProfilerActivity.NPU}
            return
        if not isinstance(activities, list):
            activities = [activities]
        for entry in activities:
            name = entry.upper() if isinstance(entry, str) else None
            if name in ProfilerActivity.__members__:
                self.activity_set.add(ProfilerActivity[name])
            else:
                self._problem(f"Set activity failed, activity must be CPU OR NPU! Got {entry!r}.")
        if not self.activity_set:
            self.activity_set = set(self._reset("activities", [ProfilerActivity.CPU, ProfilerActivity.NPU]))

    def _parse_experimental_config(self, exp_config):
        if exp_config is None or exp_config == {}:
            self.experimental_config = None  # the profile's default
            return
        if not isinstance(exp_config, dict):
            self._reset("experimental_config", None)
            return
        kwargs = {}
        for key, value in exp_config.items():
            if key not in _EXPERIMENTAL_KEYS:
                self._problem(f"Unknown experimental_config parameter {key}, it is ignored.")
            elif value is None or (key in _LIST_EXPERIMENTAL_KEYS and value == []):
                continue  # the default
            elif key in _LIST_EXPERIMENTAL_KEYS and not isinstance(value, list):
                self._reset(key, [])
            elif key == "profiler_level" and isinstance(value, str):
                kwargs[key] = getattr(ProfilerLevel, value, value)
            elif key == "aic_metrics" and isinstance(value, str):
                kwargs[key] = getattr(AiCMetrics, value, value)
            else:
                kwargs[key] = value
        if self._is_dyno:
            kwargs["record_op_args"] = False
        try:
            # _ExperimentalConfig resets (and warns about) the values it does not accept
            self.experimental_config = _ExperimentalConfig(**kwargs)
        except Exception as err:  # a value of a type it cannot even check
            self._problem(f"Invalid experimental_config ({err}), reset it to default.")
            self.experimental_config = None

    def _parse_ranks(self, json_data: dict):
        self.is_rank = self._bool(json_data, "is_rank")
        if not self.is_rank:
            return
        ranks = json_data.get("rank_list", [])
        if not isinstance(ranks, list):
            self._problem("Set rank_list failed, rank_list must be list!")
            return
        for rank in ranks:
            if _is_int(rank) and rank >= 0:
                self._rank_set.add(rank)
            else:
                self._problem(f"Invalid rank {rank!r} in rank_list, it is ignored.")

    def _bool(self, data: dict, key: str) -> bool:
        value = data.get(key, False)
        return value if isinstance(value, bool) else self._reset(key, False)

    def _int(self, data: dict, key: str, default: int, minimum: int) -> int:
        value = data.get(key, default)
        return value if _is_int(value) and value >= minimum else self._reset(key, default)

    def _reset(self, key, default):
        self._problem(f"Invalid parameter {key}, reset it to {default}.")
        return default

    def _problem(self, message):
        self.problems.append(message)
        DynamicProfilerUtils.out_log(message, DynamicProfilerUtils.LoggerLevelEnum.WARNING)

    # -- what the dynamic profile asks ---------------------------------------------------------------------------

    def valid(self) -> bool:
        """Whether this rank profiles with this config: the poller read it
        whole, and this rank is in rank_list when is_rank is set. A rank chosen
        by rank_list does not analyse its data unless async_mode is set (the
        analysis would hold it up while the other ranks go on)."""
        if not self.is_valid:
            return False
        if not self.is_rank:
            return True
        if self._rank_id in self._rank_set:
            if not self._async_mode:
                self._analyse = False
                DynamicProfilerUtils.out_log(
                    f"Rank {self._rank_id} is in rank_list {self._rank_set} and async_mode is false, "
                    "profiler data analyse will be closed !", DynamicProfilerUtils.LoggerLevelEnum.INFO)
            return True
        DynamicProfilerUtils.out_log(f"Rank {self._rank_id} not in valid rank_list {self._rank_set}!",
                                     DynamicProfilerUtils.LoggerLevelEnum.WARNING)
        return False

    def activities(self) -> list:
        return sorted(self.activity_set, key=lambda a: a.value)

    def analyse(self) -> bool:
        return self._analyse

    def async_mode(self) -> bool:
        return self._async_mode

    def active(self) -> int:
        return self._active

    def warmup(self) -> int:
        return self._warmup

    def start_step(self) -> int:
        return self._start_step

    def start(self) -> bool:
        """start_step -1: profile from the next step on."""
        return self._start_step == self.INSTANT_START_STEP

    def meta_data(self) -> dict:
        return self._meta_data

    def is_dyno_monitor(self) -> bool:
        return self._is_dyno_monitor

    @staticmethod
    def profiler_cfg_json_to_bytes(json_dict: dict) -> bytes:
        return json.dumps(json_dict).encode("utf-8")

    @staticmethod
    def bytes_to_profiler_cfg_json(bytes_shm: bytes) -> dict:
        return json.loads(bytes_shm.decode("utf-8"))
