"""torch_npu.utils._path_manager.PathManager: the path checks torch_npu's tools
(and its testing package) run before reading or writing a file.

Each check raises RuntimeError naming the path and what is wrong with it.
As in torch_npu, the check_input_* checks accept a path that does not exist
yet (the caller makes it), the readable/writeable checks need an existing
one; the *_safety helpers create or remove a path after checking it.
"""

import os
import shutil

_MAX_PATH_LENGTH = 4096
_MAX_NAME_LENGTH = 255


class PathManager:
    @classmethod
    def _input_path_common_check(cls, path: str):
        if not isinstance(path, str) or not path:
            raise RuntimeError(f"The path must be a non-empty string, got {path!r}.")
        if len(path) > _MAX_PATH_LENGTH:
            raise RuntimeError(f"The path is longer than {_MAX_PATH_LENGTH} characters: {path[:80]}...")
        for name in path.split(os.sep):
            if len(name) > _MAX_NAME_LENGTH:
                raise RuntimeError(f"The path has a component longer than {_MAX_NAME_LENGTH} characters: {path}")
        if os.path.islink(path):
            raise RuntimeError(f"The path is a soft link, which is not allowed: {path}")

    @classmethod
    def check_input_directory_path(cls, path: str):
        """A valid folder path; it may not exist yet (callers create it)."""
        cls._input_path_common_check(path)
        if os.path.isfile(path):
            raise RuntimeError(f"Invalid input path is a file path: {path}")

    @classmethod
    def check_input_file_path(cls, path: str):
        """A valid file path; it may not exist yet (callers create it)."""
        cls._input_path_common_check(path)
        if os.path.isdir(path):
            raise RuntimeError(f"Invalid input path is a directory path: {path}")

    @classmethod
    def check_directory_path_writeable(cls, path):
        """An existing path this process may write (a file or a folder)."""
        cls._existing_path_check(path)
        if not os.access(path, os.W_OK):
            raise RuntimeError(f"The path is not writable: {path}")

    @classmethod
    def check_directory_path_readable(cls, path):
        """An existing path this process may read (a file or a folder)."""
        cls._existing_path_check(path)
        if not os.access(path, os.R_OK):
            raise RuntimeError(f"The path is not readable: {path}")

    @classmethod
    def _existing_path_check(cls, path):
        if os.path.islink(path):
            raise RuntimeError(f"The path is a soft link, which is not allowed: {path}")
        if not os.path.exists(path):
            raise RuntimeError(f"The path does not exist: {path}")

    @classmethod
    def check_path_is_readable(cls, path: str):
        return os.path.exists(path) and os.access(path, os.R_OK)

    @classmethod
    def check_path_is_writeable(cls, path: str):
        return os.path.exists(path) and os.access(path, os.W_OK)

    @classmethod
    def remove_path_safety(cls, path: str):
        if not os.path.exists(path):
            return
        if os.path.islink(path):
            raise RuntimeError(f"Refusing to remove a soft link: {path}")
        try:
            shutil.rmtree(path)
        except OSError as e:
            raise RuntimeError(f"Failed to remove the directory {path}: {e}") from e

    @classmethod
    def remove_file_safety(cls, file: str):
        if not os.path.exists(file):
            return
        if os.path.islink(file):
            raise RuntimeError(f"Refusing to remove a soft link: {file}")
        try:
            os.remove(file)
        except OSError as e:
            raise RuntimeError(f"Failed to remove the file {file}: {e}") from e

    @classmethod
    def make_dir_safety(cls, path: str):
        if os.path.islink(path):
            raise RuntimeError(f"The path is a soft link, which is not allowed: {path}")
        if os.path.isdir(path):
            return
        try:
            os.makedirs(path, mode=0o750, exist_ok=True)
        except OSError as e:
            raise RuntimeError(f"Failed to create the directory {path}: {e}") from e

    @classmethod
    def create_file_safety(cls, path: str):
        if os.path.islink(path):
            raise RuntimeError(f"The path is a soft link, which is not allowed: {path}")
        if os.path.exists(path):
            return
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o640))
        except OSError as e:
            raise RuntimeError(f"Failed to create the file {path}: {e}") from e
