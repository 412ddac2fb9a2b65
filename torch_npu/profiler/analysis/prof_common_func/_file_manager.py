"""How the profiler reads and writes its files.

Every write goes to a temporary name in the same folder and is renamed, so a
process killed mid-write leaves whole files only; new files are readable by
their owner and group only (profiles hold the program's shapes and stacks).
Reads refuse files over Constant.MAX_FILE_SIZE with a warning, as torch_npu
does, instead of loading them.
"""

import csv
import io
import json
import os

from torch_npu.utils._error_code import ErrCode, prof_error
from torch_npu.utils._path_manager import PathManager
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

    @classmethod
    def read_csv_file(cls, file_path: str, class_bean: type) -> list:
        """``class_bean(row)`` for each row of the CSV file (a dict by the header line); [] when it is
        not a file, empty or over Constant.MAX_CSV_SIZE."""
        if not os.path.isfile(file_path):
            return []
        size = os.path.getsize(file_path)
        if size > Constant.MAX_CSV_SIZE:
            print_warn_msg(f"The file size exceeds the preset value, please check the file: {file_path}")
            return []
        if size == 0:
            return []
        PathManager.check_directory_path_readable(file_path)
        try:
            with open(file_path, newline="", encoding="utf-8-sig") as f:
                return [class_bean(row) for row in csv.DictReader(f)]
        except (OSError, csv.Error) as err:
            raise RuntimeError(f"Failed to read the file: {file_path}" + prof_error(ErrCode.UNAVAIL)) from err

    @classmethod
    def create_csv_file(cls, output_path: str, data: list, file_name: str, headers: list = None) -> None:
        """Writes ``data`` (a list of rows) as ``output_path``/``file_name``, after the ``headers`` line
        (nothing when there is no data)."""
        if not data:
            return
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        if headers:
            writer.writerow(headers)
        writer.writerows(data)
        cls._write(os.path.join(output_path, file_name), text.getvalue().encode("utf-8"))

    @classmethod
    def create_json_file(cls, output_path: str, data, file_name: str, indent: int = None) -> None:
        """Writes ``data`` as JSON to ``output_path``/``file_name`` (nothing when it is empty)."""
        cls.create_json_file_by_path(os.path.join(output_path, file_name), data, indent)

    @classmethod
    def create_empty_file(cls, output_path: str, file_name: str) -> None:
        """An empty ``output_path``/``file_name`` (a marker such as "parser.done")."""
        cls._write(os.path.join(output_path, file_name), b"")

    # A large trace is written in pieces: the first piece opens the JSON container and leaves it
    # open, each later piece adds its items and closes it again, the last piece's name being final.
    @classmethod
    def create_prepare_trace_json_by_path(cls, output_path: str, data) -> None:
        """Starts a JSON array (or object) with ``data``'s items, left open for
        append_trace_json_by_path."""
        cls._write(output_path, json.dumps(data, ensure_ascii=False)[:-1].encode("utf-8"))

    @classmethod
    def append_trace_json_by_path(cls, output_path: str, data, new_name: str) -> None:
        """Adds ``data``'s items to the container started at ``output_path``, closes it, and gives the
        file its final name ``new_name``."""
        tail = json.dumps(data, ensure_ascii=False)[1:]
        try:
            with open(output_path, "rb+") as f:
                f.seek(0, os.SEEK_END)
                started_empty = f.tell() <= 1  # only the opening bracket so far
                if not started_empty and tail not in ("]", "}"):
                    f.write(b",")
                f.write(tail.encode("utf-8"))
            if os.path.abspath(new_name) != os.path.abspath(output_path):
                os.replace(output_path, new_name)
        except OSError as err:
            raise RuntimeError(f"Can't write file: {output_path}" + prof_error(ErrCode.SYSCALL)) from err

    @staticmethod
    def check_file_owner(path: str) -> bool:
        """Whether the file belongs to this user or to root (anyone else's file is not read)."""
        owner = os.stat(path).st_uid
        return owner in (0, os.geteuid())

    @staticmethod
    def check_db_file_vaild(db_path: str) -> None:  # sic: torch_npu's name
        """Refuses (RuntimeError) a database file over Constant.MAX_FILE_SIZE."""
        if os.path.getsize(db_path) > Constant.MAX_FILE_SIZE:
            raise RuntimeError(f"The database file is too large to read: {db_path}"
                               + prof_error(ErrCode.VALUE))

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
