"""Runs the analysis's parsing steps, each in the main process, a thread or a
child process, in the order their dependencies allow.

A step is a ``ConcurrentTask``: ``run(user_input)`` returns ``(status,
output)``, ``user_input`` holding the outputs of the steps it depends on.
Threads and child processes report back through a pipe, in messages of::

    type (u32, big-endian) | length (u32, big-endian) | payload

PRINT carries UTF-8 text for the manager to print (so the children's lines do
not interleave), STATUS the step's status (i32) and OUTPUT its pickled output;
a worker sends STATUS and OUTPUT together, OUTPUT last, and a pipe that closes
before them means the step died.

A step run in the main process that raises stops the whole run (it is logged,
the other workers are stopped, and that step is left Running); in a thread or
a child process an exception only fails that step.
"""

import enum
import multiprocessing
import os
import pickle
import selectors
import struct
import threading
import time
import traceback

from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_error_msg

__all__ = []

_HEADER = struct.Struct(">II")
_STATUS = struct.Struct(">i")
_READ_SIZE = 64 * 1024


class TaskStatus(enum.Enum):
    Init = 0
    Running = 1
    Succeed = 2
    Failed = 3


class ConcurrentMode:
    """Where a task runs."""
    MAIN_PROCESS = 0
    SUB_PROCESS = 1
    PTHREAD = 2


class TaskMsgType(enum.Enum):
    PRINT = 1
    OUTPUT = 2
    STATUS = 3


def _message(msg_type: TaskMsgType, payload: bytes) -> bytes:
    return _HEADER.pack(msg_type.value, len(payload)) + payload


def _write_all(fd: int, data: bytes):
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def send_print_req_to_manager(fd: int, text: str):
    """Asks the manager to print ``text``."""
    _write_all(fd, _message(TaskMsgType.PRINT, str(text).encode("utf-8")))


def send_result_to_manager(fd: int, status: int, output):
    """Reports a finished task: its status and its output (which must pickle), in one write."""
    _write_all(fd, _message(TaskMsgType.STATUS, _STATUS.pack(status))
               + _message(TaskMsgType.OUTPUT, pickle.dumps(output)))


class ConcurrentTask:
    """A step of the analysis. Subclasses implement ``run``."""

    def __init__(self, name: str, deps: list, mode: int):
        self.name = name
        self.deps = list(deps or [])
        self.mode = mode

    def run(self, user_input: dict):
        """Does the step; returns (Constant.SUCCESS or Constant.FAIL, output)."""
        raise NotImplementedError


def _run_and_report(task: ConcurrentTask, user_input: dict, fd: int):
    """A worker's body (thread or child process): runs the task and reports its result on ``fd``."""
    try:
        try:
            status, output = task.run(user_input)
        except Exception:  # noqa: BLE001 - reported as the task's failure
            send_print_req_to_manager(fd, f"Task {task.name} failed:\n{traceback.format_exc()}")
            status, output = Constant.FAIL, None
        send_result_to_manager(fd, status, output)
    finally:
        os.close(fd)


class _TaskInfo:
    """What the manager knows of one task."""

    def __init__(self, task: ConcurrentTask):
        self.task = task
        self.status = TaskStatus.Init
        self.output = None
        self.start_time = None
        self.end_time = None
        # a worker's end of the conversation
        self.worker = None
        self.read_fd = None
        self.pending = b""
        self.reported_status = None

    @property
    def duration(self):
        if self.start_time is None:
            return 0.0
        return (self.end_time or time.time()) - self.start_time


class ConcurrentTasksManager:
    def __init__(self, max_concurrent_num: int = None):
        self.task_infos = {}
        self._max_workers = max(1, max_concurrent_num or os.cpu_count() or 1)
        self._selector = None
        self._fork = multiprocessing.get_context("fork")

    def add_task(self, task: ConcurrentTask):
        if task.name in self.task_infos:
            raise ValueError(f"A task named {task.name!r} was already added.")
        if task.mode not in (ConcurrentMode.MAIN_PROCESS, ConcurrentMode.SUB_PROCESS, ConcurrentMode.PTHREAD):
            raise ValueError(f"Task {task.name!r} has an unknown mode {task.mode!r}.")
        self.task_infos[task.name] = _TaskInfo(task)

    def run(self):
        """Runs every task (those whose dependencies failed are marked Failed without running)."""
        self._selector = selectors.DefaultSelector()
        try:
            self._schedule()
        except Exception as err:  # noqa: BLE001 - a failing step must not fail the profile
            print_error_msg(f"The analysis stopped: {err!r}")
            self._stop_workers()
        finally:
            self._selector.close()
            self._selector = None
            self.log_task_execution_summary()

    # --- scheduling --------------------------------------------------------------
    def _schedule(self):
        while True:
            self._start_ready_tasks()
            if not self._selector.get_map():
                break
            for key, _ in self._selector.select():
                self._on_readable(key.data)
        for info in self.task_infos.values():
            if info.status == TaskStatus.Init:  # waited on a task that failed
                info.status = TaskStatus.Failed

    def _dependencies_state(self, info):
        """TaskStatus.Succeed when all its (known) dependencies succeeded, Failed when one failed,
        else Running (wait)."""
        states = [self.task_infos[dep].status for dep in info.task.deps if dep in self.task_infos]
        if TaskStatus.Failed in states:
            return TaskStatus.Failed
        if all(state == TaskStatus.Succeed for state in states):
            return TaskStatus.Succeed
        return TaskStatus.Running

    def _start_ready_tasks(self):
        started = True
        while started:  # a task run inline may make others ready
            started = False
            for info in self.task_infos.values():
                if info.status != TaskStatus.Init:
                    continue
                state = self._dependencies_state(info)
                if state == TaskStatus.Failed:
                    info.status = TaskStatus.Failed
                    started = True
                elif state == TaskStatus.Succeed and self._has_room(info):
                    self._start(info)
                    started = True

    def _has_room(self, info) -> bool:
        return info.task.mode == ConcurrentMode.MAIN_PROCESS or len(self._selector.get_map()) < self._max_workers

    def _start(self, info):
        user_input = {dep: self.task_infos[dep].output for dep in info.task.deps if dep in self.task_infos}
        info.status = TaskStatus.Running
        info.start_time = time.time()
        if info.task.mode == ConcurrentMode.MAIN_PROCESS:
            status, output = info.task.run(user_input)  # an exception here stops the run
            self._finish(info, status, output)
            return
        read_fd, write_fd = os.pipe()
        if info.task.mode == ConcurrentMode.SUB_PROCESS:
            info.worker = self._fork.Process(target=_run_and_report, args=(info.task, user_input, write_fd),
                                             name=f"profiler-{info.task.name}", daemon=True)
            info.worker.start()
            os.close(write_fd)  # the child's copy is the only writer left
        else:
            info.worker = threading.Thread(target=_run_and_report, args=(info.task, user_input, write_fd),
                                           name=f"profiler-{info.task.name}", daemon=True)
            info.worker.start()
        info.read_fd = read_fd
        self._selector.register(read_fd, selectors.EVENT_READ, info)

    def _finish(self, info, status, output):
        info.status = TaskStatus.Succeed if status == Constant.SUCCESS else TaskStatus.Failed
        info.output = output
        info.end_time = time.time()

    # --- messages from the workers -------------------------------------------------
    def _on_readable(self, info):
        chunk = os.read(info.read_fd, _READ_SIZE)
        if not chunk:  # the worker is gone without its result
            self._release(info)
            self._finish(info, Constant.FAIL, None)
            return
        info.pending += chunk
        while len(info.pending) >= _HEADER.size:
            msg_type, length = _HEADER.unpack_from(info.pending)
            end = _HEADER.size + length
            if len(info.pending) < end:
                break
            payload, info.pending = info.pending[_HEADER.size:end], info.pending[end:]
            if self._on_message(info, msg_type, payload):
                return

    def _on_message(self, info, msg_type, payload) -> bool:
        """Handles one message; True once the task's result is in (the conversation is over)."""
        if msg_type == TaskMsgType.PRINT.value:
            print(payload.decode("utf-8", errors="replace"), flush=True)
        elif msg_type == TaskMsgType.STATUS.value:
            info.reported_status = _STATUS.unpack(payload)[0]
        elif msg_type == TaskMsgType.OUTPUT.value:
            output = pickle.loads(payload)
            self._release(info)
            self._finish(info, info.reported_status, output)
            return True
        return False

    def _release(self, info):
        """Stops listening to the worker and waits for it to end."""
        self._selector.unregister(info.read_fd)
        os.close(info.read_fd)
        info.read_fd = None
        if info.worker is not None:
            info.worker.join()
            info.worker = None

    def _stop_workers(self):
        for info in self.task_infos.values():
            if info.read_fd is None:
                continue
            if isinstance(info.worker, multiprocessing.process.BaseProcess) and info.worker.is_alive():
                info.worker.terminate()
            self._selector.unregister(info.read_fd)
            os.close(info.read_fd)
            info.read_fd = None
            info.worker = None  # a thread cannot be stopped: it is left to end (daemon)

    # --- reporting -------------------------------------------------------------
    def log_task_execution_summary(self):
        """Writes each task's outcome and time to the analysis log (when one is open)."""
        from torch_npu.profiler.analysis.prof_common_func._log import ProfilerLogger
        if ProfilerLogger._instance is None:
            return
        logger = ProfilerLogger.get_instance()
        for name, info in self.task_infos.items():
            logger.info("Task %s: %s in %.3f s", name, info.status.name, info.duration)
