"""DynamicProfilerShareMemory: the shared-memory segment through which the
ranks of a job on one node share its dynamic-profiling config (Note [One
config poller per job] in __init__.py).

Layout of the segment (``CFG_BUFFER_SIZE`` bytes, little-endian):

    0   u32  change stamp: how many configs the poller has published (0: none)
    4   u32  creator's pid
    8   u64  creator's start time (clock ticks since boot, /proc/<pid>/stat)
    16  u32  length of the config
    20  ...  the config: JSON, with "is_valid" added by the poller

Ownership: the process that creates the segment owns it and unlinks it when
it releases it (clean_resource, garbage collection or interpreter exit); it
is also registered with multiprocessing's resource tracker, which unlinks it
if that process is killed. Other processes attach without registering (the
tracker would unlink it when *they* exit) and only close it. Writing the
config and reading it whole hold a ``flock`` on the segment.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import random
import struct
import sys
import time
import weakref
from multiprocessing import resource_tracker, shared_memory

from torch_npu.profiler.analysis.prof_common_func._constant import print_error_msg

from ._dynamic_profiler_utils import DynamicProfilerUtils

try:
    import _posixshmem
except ImportError:  # not a POSIX system: no stale segment can be found by name
    _posixshmem = None

__all__ = []

_HEADER = struct.Struct("<IIQI")  # change stamp, creator pid, creator start ticks, config length
_STAMP = struct.Struct("<I")
_CREATE_TRIES = 10
_SEGMENT_PREFIX = "DynamicProfileNpuShm"


def _segment_name(config_path):
    """One segment per job (the ranks' parent process) and config file."""
    watched = os.path.abspath(config_path) if config_path else "dynolog"
    digest = hashlib.sha1(watched.encode("utf-8")).hexdigest()[:12]
    return f"{_SEGMENT_PREFIX}_{os.getuid()}_{os.getppid()}_{digest}"


@contextlib.contextmanager
def _untracked():
    """Attaches without registering with the resource tracker (Python < 3.13
    registers every SharedMemory, and the tracker unlinks what a process
    registered when it exits: an attaching rank would remove the segment)."""
    register = resource_tracker.register
    resource_tracker.register = lambda *args, **kwargs: None
    try:
        yield
    finally:
        resource_tracker.register = register


def _attach(name):
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name=name, track=False)
    with _untracked():
        return shared_memory.SharedMemory(name=name)


@contextlib.contextmanager
def _locked(shm, exclusive):
    fcntl.flock(shm._fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    try:
        yield
    finally:
        fcntl.flock(shm._fd, fcntl.LOCK_UN)


def _name_refers_to(shm):
    """Whether the segment's name still opens this segment (and not one made
    after it was unlinked)."""
    if _posixshmem is None:
        return True
    try:
        fd = _posixshmem.shm_open(shm._name, os.O_RDONLY, mode=0o600)
    except OSError:
        return False
    try:
        return os.fstat(fd).st_ino == os.fstat(shm._fd).st_ino
    finally:
        os.close(fd)


def _release(shm, owner_pid, rank_id):
    """Closes the segment; its creator also unlinks it (only in the process
    that created it: a forked child inherits the object, not the ownership)."""
    try:
        if owner_pid == os.getpid():
            with _locked(shm, exclusive=True):
                if _name_refers_to(shm):
                    shm.unlink()  # and unregisters it from the resource tracker
                else:  # removed as stale meanwhile: the tracker must not unlink its successor
                    resource_tracker.unregister(shm._name, "shared_memory")
            DynamicProfilerUtils.out_log(f"Rank {rank_id} unlink shm", DynamicProfilerUtils.LoggerLevelEnum.INFO)
        shm.close()
    except Exception as ex:  # at exit or in a finalizer: log, never raise
        DynamicProfilerUtils.out_log(f"Rank {rank_id} unlink shm failed, may be removed, {ex} has occur",
                                     DynamicProfilerUtils.LoggerLevelEnum.ERROR)


class DynamicProfilerShareMemory:
    # profiler_config.json as dynamic_profile.init() writes it when the folder has none
    JSON_DATA = {
        "activities": ["CPU", "NPU"],
        "prof_dir": "./",
        "analyse": False,
        "async_mode": False,
        "record_shapes": False,
        "profile_memory": False,
        "with_stack": False,
        "with_flops": False,
        "with_modules": False,
        "active": 1,
        "warmup": 0,
        "start_step": 0,
        "is_rank": False,
        "rank_list": [],
        "experimental_config": {
            "profiler_level": "Level0",
            "aic_metrics": "AiCoreNone",
            "l2_cache": False,
            "op_attr": False,
            "gc_detect_threshold": None,
            "data_simplification": True,
            "record_op_args": False,
            "export_type": ["text"],
            "msprof_tx": False,
            "mstx": False,
            "host_sys": [],
            "mstx_domain_include": [],
            "mstx_domain_exclude": [],
            "sys_io": False,
            "sys_interconnection": False,
        },
    }
    # Launchers import torch_npu too (torch autoloads it) but never step: they take no part.
    DISTRIBUTED_LAUNCHERS = ("torchrun", "torch_npu_run", "vllm")
    DISTRIBUTED_MODULES = {
        "torch.distributed.run",
        "torch.distributed.launch",
        "torch_npu.distributed.run",
        "torch_npu.distributed.launch",
        "vllm.entrypoints.openai.api_server",
    }

    def __init__(self, path: str, config_path: str, rank_id: int):
        self._path = path
        self.config_path = config_path
        self._rank_id = rank_id
        self.shm_path = _segment_name(config_path)  # the segment's name (real torch_npu's attribute name)
        self._shm_buf_bytes_size = DynamicProfilerUtils.CFG_BUFFER_SIZE
        self._is_dyno = DynamicProfilerUtils.is_dyno_model()
        self.is_create_process = False
        self.is_mmap = False  # real torch_npu's file-backed fallback for Python < 3.8: never used here
        self.shm = None
        self.cur_mtime = 0  # the config file's mtime (ns) when this process made the segment
        self._finalizer = None
        self._clean_shm_for_killed()
        self._create_shm()
        if self.is_create_process and not self._is_dyno:
            self._create_prof_cfg()

    # -- processes -----------------------------------------------------------------------------------------------

    def _get_pid_st_ctime(self, pid):
        """When process ``pid`` started (clock ticks since boot), or None if
        that cannot be read. With the pid, it names a process uniquely."""
        try:
            fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
            try:
                stat_line = os.read(fd, 4096).decode("utf-8", errors="replace")
            finally:
                os.close(fd)
            # the fields after the command name "(...)", which may hold spaces; starttime is field 22
            return int(stat_line.rsplit(")", 1)[1].split()[19])
        except Exception as ex:
            DynamicProfilerUtils.out_log(f"An error is occurred: {ex}", DynamicProfilerUtils.LoggerLevelEnum.ERROR)
            return None

    def _creator_alive(self, pid, start_ticks):
        if pid == 0:
            return True  # its creator has not written the header yet
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # another user's process
        if start_ticks == 0:
            return True
        now = self._get_pid_st_ctime(pid)
        return now is None or now == start_ticks  # another start time: the pid was reused

    def _is_worker_process(self):
        """False for a distributed launcher (torchrun, ``python -m
        torch.distributed.run``, ...), True for anything else."""
        if os.environ.get("RANK") is not None:  # torchrun sets it for its workers
            return True
        try:
            with open(f"/proc/{os.getpid()}/cmdline", "rb") as f:
                args = [a.decode("utf-8", errors="ignore") for a in f.read(1024).split(b"\x00") if a]
        except OSError as ex:
            DynamicProfilerUtils.out_log(f"Failed to read the cmdline of current process: {ex}",
                                         DynamicProfilerUtils.LoggerLevelEnum.WARNING)
            return True
        if len(args) >= 2 and args[1].endswith(self.DISTRIBUTED_LAUNCHERS):
            return False
        return not (len(args) >= 3 and args[1] == "-m" and args[2] in self.DISTRIBUTED_MODULES)

    # -- the segment ---------------------------------------------------------------------------------------------

    def _clean_shm_for_killed(self):
        """Removes a segment of this name whose creator is no longer running
        (a killed job's), so that this process makes a fresh one."""
        try:
            shm = _attach(self.shm_path)
        except FileNotFoundError:
            return
        except Exception as ex:
            DynamicProfilerUtils.out_log(f"Checking shared memory {self.shm_path} failed: {ex}",
                                         DynamicProfilerUtils.LoggerLevelEnum.WARNING)
            return
        try:
            with _locked(shm, exclusive=True):
                if shm.size < _HEADER.size or not _name_refers_to(shm):
                    return
                _, pid, start_ticks, _ = _HEADER.unpack_from(shm.buf)
                if self._creator_alive(pid, start_ticks):
                    return
                _posixshmem.shm_unlink(shm._name)
            DynamicProfilerUtils.out_log(f"Removed shared memory {self.shm_path} of process {pid}, which is no "
                                         "longer running.", DynamicProfilerUtils.LoggerLevelEnum.WARNING)
        finally:
            shm.close()

    def _create_shm(self):
        if not self._is_worker_process():
            DynamicProfilerUtils.out_log("A distributed launcher: no dynamic profiler shared memory.",
                                         DynamicProfilerUtils.LoggerLevelEnum.INFO)
            return
        self._create_shm_over_py38()

    def _create_shm_over_py38(self):
        """Attaches to the job's segment, or creates it: of processes racing,
        exactly one creates it (shm_open's O_EXCL), the others attach."""
        for tries_left in reversed(range(_CREATE_TRIES)):
            try:
                self._adopt(_attach(self.shm_path), creator=False)
                DynamicProfilerUtils.out_log(f"Rank {self._rank_id} shared memory is connected.",
                                             DynamicProfilerUtils.LoggerLevelEnum.INFO)
                return
            except FileNotFoundError:
                pass
            except Exception as ex:  # e.g. found before its creator sized it
                DynamicProfilerUtils.out_log(f"Rank {self._rank_id} shared memory create failed, retry times = "
                                             f"{tries_left}, {ex} has occur .",
                                             DynamicProfilerUtils.LoggerLevelEnum.ERROR)
                time.sleep(0.02)
                continue
            try:
                shm = shared_memory.SharedMemory(name=self.shm_path, create=True, size=self._shm_buf_bytes_size)
            except Exception as ex:  # FileExistsError: another rank was first; attach to it next time
                DynamicProfilerUtils.out_log(f"Rank {self._rank_id} shared memory create failed, retry times = "
                                             f"{tries_left}, {ex} has occur.",
                                             DynamicProfilerUtils.LoggerLevelEnum.ERROR)
                time.sleep(random.uniform(0, 0.02))
                continue
            with _locked(shm, exclusive=True):
                _HEADER.pack_into(shm.buf, 0, 0, os.getpid(), self._get_pid_st_ctime(os.getpid()) or 0, 0)
            self._adopt(shm, creator=True)
            DynamicProfilerUtils.out_log(f"Rank {self._rank_id} shared memory is created.",
                                         DynamicProfilerUtils.LoggerLevelEnum.INFO)
            return
        raise RuntimeError(f"Failed to create shared memory {self.shm_path} for the dynamic profiler.")

    def _adopt(self, shm, creator):
        if shm.size < _HEADER.size:
            shm.close()
            raise ValueError(f"shared memory {self.shm_path} has {shm.size} bytes, fewer than its header")
        self.shm = shm
        self.is_create_process = creator
        self._finalizer = weakref.finalize(self, _release, shm, os.getpid() if creator else None, self._rank_id)

    def _create_prof_cfg(self):
        """Writes the default profiler_config.json if there is none."""
        if not os.path.exists(self.config_path):
            DynamicProfilerUtils.out_log("Create profiler_config.json default.",
                                         DynamicProfilerUtils.LoggerLevelEnum.INFO)
            try:
                fd = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
                with os.fdopen(fd, "w") as f:
                    json.dump(self.JSON_DATA, f, indent=4)
            except FileExistsError:
                pass
        else:
            if not os.access(self.config_path, os.R_OK):
                print_error_msg(f"Dynamic profiler config '{self.config_path}' is not readable, "
                                f"please check the permission, and execute chmod u+r {self.config_path}")
            if not os.access(self.config_path, os.W_OK):
                print_error_msg(f"Dynamic profiler config '{self.config_path}' is not writeable, "
                                f"please check the permission, and execute chmod u+w {self.config_path}")
        self.cur_mtime = os.stat(self.config_path).st_mtime_ns

    def clean_resource(self):
        """Closes the segment (its creator also unlinks it). Idempotent."""
        self.shm = None
        if self._finalizer is not None:
            self._finalizer()

    # -- the config ----------------------------------------------------------------------------------------------

    def read_bytes(self, read_time=False):
        """The change stamp's 4 bytes (``read_time=True``: cheap, without the
        lock, what each step reads), else the published config's bytes."""
        if read_time:
            return bytes(self.shm.buf[:_STAMP.size])
        return self.read_published()[1]

    def read_published(self):
        """(change stamp, config bytes), read together under the lock."""
        with _locked(self.shm, exclusive=False):
            stamp, _, _, length = _HEADER.unpack_from(self.shm.buf)
            return stamp, bytes(self.shm.buf[_HEADER.size:_HEADER.size + length])

    def publish(self, config_bytes: bytes):
        """Makes ``config_bytes`` the published config, with a new change
        stamp (the poller's call)."""
        if _HEADER.size + len(config_bytes) > self.shm.size:
            raise ValueError(f"the config has {len(config_bytes)} bytes, more than the "
                             f"{self.shm.size - _HEADER.size} the shared memory holds")
        with _locked(self.shm, exclusive=True):
            stamp, pid, start_ticks, _ = _HEADER.unpack_from(self.shm.buf)
            self.shm.buf[_HEADER.size:_HEADER.size + len(config_bytes)] = config_bytes
            _HEADER.pack_into(self.shm.buf, 0, (stamp + 1) & 0xFFFFFFFF, pid, start_ticks, len(config_bytes))
