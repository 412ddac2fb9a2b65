"""torch_npu.utils._path_manager.PathManager: the path checks torch_npu's tools
(and its testing package) run before reading or writing a file.

Each check raises RuntimeError naming the path and what is wrong with it.
As in torch_npu, the check_input_* checks accept a path that does not exist
yet (the caller makes it), the readable/writeable checks need an existing
one; the *_safety helpers create or remove a path after checking it.

Soft links are refused throughout: a tool that follows one could be led to
read or overwrite a file outside the folder it was given.
"""

import os
import shutil

# Linux's PATH_MAX and NAME_MAX: a longer path cannot be opened anyway.
_MAX_PATH_LENGTH = 4096
_MAX_NAME_LENGTH = 255
_NEW_FOLDER_MODE = 0o750
_NEW_FILE_MODE = 0o640


def _refuse_soft_link(path):
    if os.path.islink(path):
        raise RuntimeError(f"The path is a soft link, which is not allowed: {path}")


def _check_spelling(path):
    """A path given by the user: a non-empty string the system can open,
    and no soft link."""
    if not (isinstance(path, str) and path):
        raise RuntimeError(f"The path must be a non-empty string, got {path!r}.")
    if len(path) > _MAX_PATH_LENGTH:
        raise RuntimeError(f"The path is longer than {_MAX_PATH_LENGTH} characters: {path[:80]}...")
    if max(len(part) for part in path.split(os.sep)) > _MAX_NAME_LENGTH:
        raise RuntimeError(f"The path has a component longer than {_MAX_NAME_LENGTH} characters: {path}")
    _refuse_soft_link(path)


def _check_access(path, mode, failure):
    """An existing path, no soft link, that this process may use as `mode`."""
    _refuse_soft_link(path)
    if not os.path.exists(path):
        raise RuntimeError(f"The path does not exist: {path}")
    if not os.access(path, mode):
        raise RuntimeError(f"{failure}: {path}")


def _allows(path, mode):
    return os.path.exists(path) and os.access(path, mode)


def _remove(path, remover, kind):
    """Removes `path` with `remover` unless it is absent (nothing to do) or
    a soft link (refused: the link's target is not ours to delete)."""
    if not os.path.exists(path):
        return
    if os.path.islink(path):
        raise RuntimeError(f"Refusing to remove a soft link: {path}")
    try:
        remover(path)
    except OSError as error:
        raise RuntimeError(f"Failed to remove the {kind} {path}: {error}") from error


def _touch(path):
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, _NEW_FILE_MODE))


class PathManager:
    """The checks as class methods, the form torch_npu's callers use."""

    @classmethod
    def check_path_is_readable(cls, path: str):
        """Whether the path exists and may be read; raises nothing."""
        return _allows(path, os.R_OK)

    @classmethod
    def check_path_is_writeable(cls, path: str):
        """Whether the path exists and may be written; raises nothing."""
        return _allows(path, os.W_OK)

    @classmethod
    def check_directory_path_readable(cls, path):
        """An existing path this process may read (a file or a folder)."""
        _check_access(path, os.R_OK, "The path is not readable")

    @classmethod
    def check_directory_path_writeable(cls, path):
        """An existing path this process may write (a file or a folder)."""
        _check_access(path, os.W_OK, "The path is not writable")

    @classmethod
    def check_input_file_path(cls, path: str):
        """A valid file path; it may not exist yet (callers create it)."""
        _check_spelling(path)
        if os.path.isdir(path):
            raise RuntimeError(f"Invalid input path is a directory path: {path}")

    @classmethod
    def check_input_directory_path(cls, path: str):
        """A valid folder path; it may not exist yet (callers create it)."""
        _check_spelling(path)
        if os.path.isfile(path):
            raise RuntimeError(f"Invalid input path is a file path: {path}")

    @classmethod
    def remove_file_safety(cls, file: str):
        """Deletes a file; an absent one is no error."""
        _remove(file, os.remove, "file")

    @classmethod
    def remove_path_safety(cls, path: str):
        """Deletes a folder with its contents; an absent one is no error."""
        _remove(path, shutil.rmtree, "directory")

    @classmethod
    def create_file_safety(cls, path: str):
        """Creates an empty file unless the path exists already."""
        _refuse_soft_link(path)
        if os.path.exists(path):
            return
        try:
            _touch(path)
        except OSError as error:
            raise RuntimeError(f"Failed to create the file {path}: {error}") from error

    @classmethod
    def make_dir_safety(cls, path: str):
        """Creates the folder (and its parents) unless it is there already."""
        _refuse_soft_link(path)
        if os.path.isdir(path):
            return
        try:
            os.makedirs(path, mode=_NEW_FOLDER_MODE, exist_ok=True)
        except OSError as error:
            raise RuntimeError(f"Failed to create the directory {path}: {error}") from error
