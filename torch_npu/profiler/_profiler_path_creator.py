"""Where each profile writes its ``*_ascend_pt`` folder.

Every profile (``torch_npu.profiler.profile``, ``_KinetoProfile``) writes its
raw data into a folder of its own, created when its trace starts, whether or
not ``tensorboard_trace_handler`` is its ``on_trace_ready``; the handler then
analyses that folder. The folder is ``{root}/{worker}_{pid}_{time}_ascend_pt``:
root is the handler's ``dir_name``, else ``$ASCEND_WORK_PATH/profiling_data``,
else the current directory; worker the handler's ``worker_name``, else the
host name. ``ProfPathCreator()`` is one object per process, as in real
torch_npu: ``get_prof_dir()`` names the last folder made.
"""

import datetime
import os
import pathlib
import shutil
import socket

__all__ = []


def _check_writable(path):
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RuntimeError(f"The profiler's output directory '{path}' cannot be created: {e.strerror}. Pass a "
                           f"writable dir_name to tensorboard_trace_handler.") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise RuntimeError(f"The profiler's output directory '{path}' is not writable. Pass a writable dir_name "
                           f"to tensorboard_trace_handler.")


def default_root():
    work = os.environ.get("ASCEND_WORK_PATH")
    return os.path.join(work, "profiling_data") if work else os.getcwd()


class ProfPathCreator:
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance._worker_name = None
            cls._instance._dir_name = None
            cls._instance._prof_dir = None
            cls._instance.is_prof_inited = False
        return cls._instance

    def init(self, worker_name=None, dir_name=None):
        """The worker name and root of the folders made from now on (None: the defaults)."""
        self._worker_name = worker_name
        self._dir_name = dir_name
        self.is_prof_inited = True

    def create_prof_dir(self):
        """Makes the next profile's folder and returns it (a pathlib.Path)."""
        root = pathlib.Path(self._dir_name if self._dir_name else default_root()).expanduser().resolve()
        _check_writable(root)
        worker = self._worker_name or socket.gethostname()
        stamp = datetime.datetime.now().strftime("%Y%m%d%H%M%S%f")[:-3]
        folder = root / f"{worker}_{os.getpid()}_{stamp}_ascend_pt"
        folder.mkdir(parents=True, exist_ok=True)
        self._prof_dir = folder
        self.is_prof_inited = True  # until the profile's files are written (_ProfInterface.finalize_trace)
        return folder

    def get_prof_dir(self):
        """The last folder made (a str), or None."""
        return None if self._prof_dir is None else str(self._prof_dir)

    def delete_prof_dir(self):
        """Removes the last folder made (a profile stopped before it recorded anything)."""
        if self._prof_dir is not None and self._prof_dir.is_dir():
            shutil.rmtree(self._prof_dir)
        self._prof_dir = None
