"""How the profiler reads and writes its files.

Every write goes to a temporary name in the same folder and is renamed, so a
process killed mid-write leaves whole files only; new files are readable by
their owner and group only (profiles hold the program's shapes and stacks).
Reads refuse files over Constant.MAX_FILE_SIZE with a warning, as torch_npu
does, instead of loading them.
"""

import json
import os

from torch_npu.utils._error_code import ErrCode, prof_error
from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_warn_msg

__all__ = []

_DATA_FILE_MODE = 0o640


def write_atomically(path, data, mode=0o666):
    """Writes ``data`` (text or bytes) to ``path`` whole: to a temporary name
    in the same folder, then renamed, so a process killed mid-write leaves
    whole files only. ``mode``: a new file's permissions (before the umask).
    The profiler's one writer: the analysis, the CANN raw-data folder and
    FileManager write through it."""
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, path)
    except OSError:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


class FileManager:
    @classmethod
    def file_read_all(cls, file_path: str, mode: str = "r"):
        """The file's contents ('' when it is missing, empty or too large)."""
        if not cls._readable_size(file_path):
            return b"" if "b" in mode else ""
        try:
            with open(file_path, mode) as f:
                return f.read()
        except OSError as err:
            raise RuntimeError(f"Can't read file: {file_path}" + prof_error(ErrCode.UNAVAIL)) from err

    @classmethod
    def read_json_file(cls, file_path: str) -> dict:
        """The file's JSON ({} when it is missing, empty or too large)."""
        if not cls._readable_size(file_path):
            return {}
        try:
            with open(file_path, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError) as err:
            raise RuntimeError(f"Failed to read the file: {file_path}" + prof_error(ErrCode.UNAVAIL)) from err

    @classmethod
    def create_json_file_by_path(cls, output_path: str, data, indent: int = None) -> None:
        """Writes ``data`` as JSON (nothing when it is empty)."""
        if data:
            cls._write(output_path, json.dumps(data, indent=indent, ensure_ascii=False).encode("utf-8"))

    @classmethod
    def create_text_file_by_path(cls, output_path: str, data: str) -> None:
        if data:
            cls._write(output_path, data.encode("utf-8"))

    @classmethod
    def create_bin_file_by_path(cls, output_path: str, data: bytes) -> None:
        if data:
            cls._write(output_path, bytes(data))

    @staticmethod
    def _readable_size(file_path):
        if not os.path.isfile(file_path):
            return False
        size = os.path.getsize(file_path)
        if size > Constant.MAX_FILE_SIZE:
            print_warn_msg(f"The file size exceeds the preset value, please check the file: {file_path}")
            return False
        return size > 0

    @staticmethod
    def _write(output_path, payload):
        output_path = os.path.abspath(output_path)
        try:
            os.makedirs(os.path.dirname(output_path), exist_ok=True)
            write_atomically(output_path, payload, _DATA_FILE_MODE)
        except OSError as err:
            raise RuntimeError(f"Can't create file: {output_path}" + prof_error(ErrCode.SYSCALL)) from err
