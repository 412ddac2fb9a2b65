"""torch_npu.utils._path_manager.PathManager: the checks torch_npu's tools run
on a path before using it (soft links refused everywhere, a path that does not
exist yet accepted by the input checks), and the create / remove helpers."""

import os

import pytest

from torch_npu.utils._path_manager import PathManager


@pytest.fixture
def tree(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "file.txt").write_text("x")
    (tmp_path / "link").symlink_to(folder)
    return tmp_path


def test_input_checks_accept_a_new_path_and_refuse_the_wrong_kind(tree):
    PathManager.check_input_directory_path(str(tree / "not-yet"))
    PathManager.check_input_file_path(str(tree / "not-yet.txt"))
    with pytest.raises(RuntimeError, match="Invalid input path is a file path"):
        PathManager.check_input_directory_path(str(tree / "folder" / "file.txt"))
    with pytest.raises(RuntimeError, match="Invalid input path is a directory path"):
        PathManager.check_input_file_path(str(tree / "folder"))


@pytest.mark.parametrize("path, message", [
    ("", "must be a non-empty string"),
    (None, "must be a non-empty string"),
    ("/" + "a" * 4100, "longer than 4096 characters"),
    ("/tmp/" + "n" * 256, "component longer than 255 characters"),
])
def test_input_checks_refuse_paths_the_system_cannot_open(path, message):
    for check in (PathManager.check_input_directory_path, PathManager.check_input_file_path):
        with pytest.raises(RuntimeError, match=message):
            check(path)


def test_soft_links_are_refused_by_every_check_and_helper(tree):
    link = str(tree / "link")
    for refuse in (PathManager.check_input_directory_path, PathManager.check_input_file_path,
                   PathManager.check_directory_path_readable, PathManager.check_directory_path_writeable,
                   PathManager.make_dir_safety, PathManager.create_file_safety):
        with pytest.raises(RuntimeError, match="soft link, which is not allowed"):
            refuse(link)
    for remove in (PathManager.remove_path_safety, PathManager.remove_file_safety):
        with pytest.raises(RuntimeError, match="Refusing to remove a soft link"):
            remove(link)
    assert (tree / "folder" / "file.txt").exists()  # the link's target is untouched


def test_access_checks_need_an_existing_path(tree):
    PathManager.check_directory_path_readable(str(tree / "folder"))
    PathManager.check_directory_path_writeable(str(tree / "folder" / "file.txt"))
    for check in (PathManager.check_directory_path_readable, PathManager.check_directory_path_writeable):
        with pytest.raises(RuntimeError, match="The path does not exist"):
            check(str(tree / "absent"))
    assert PathManager.check_path_is_readable(str(tree / "folder"))
    assert PathManager.check_path_is_writeable(str(tree / "folder"))
    assert not PathManager.check_path_is_readable(str(tree / "absent"))
    assert not PathManager.check_path_is_writeable(str(tree / "absent"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root may read and write anything")
def test_access_checks_name_the_missing_permission(tree):
    locked = tree / "locked"
    locked.mkdir(mode=0o000)
    try:
        with pytest.raises(RuntimeError, match="The path is not readable"):
            PathManager.check_directory_path_readable(str(locked))
        with pytest.raises(RuntimeError, match="The path is not writable"):
            PathManager.check_directory_path_writeable(str(locked))
        assert not PathManager.check_path_is_readable(str(locked))
    finally:
        locked.chmod(0o700)


def test_create_and_remove_helpers(tree):
    folder = tree / "new" / "nested"
    PathManager.make_dir_safety(str(folder))
    PathManager.make_dir_safety(str(folder))  # already there: nothing to do
    assert folder.is_dir() and (folder.stat().st_mode & 0o777) == 0o750 & ~_umask()
    file = folder / "made.txt"
    PathManager.create_file_safety(str(file))
    file.write_text("kept")
    PathManager.create_file_safety(str(file))  # an existing file is left as it is
    assert file.read_text() == "kept" and (file.stat().st_mode & 0o777) == 0o640 & ~_umask()
    PathManager.remove_file_safety(str(file))
    PathManager.remove_file_safety(str(file))  # absent: no error
    assert not file.exists()
    PathManager.remove_path_safety(str(tree / "new"))
    PathManager.remove_path_safety(str(tree / "new"))
    assert not (tree / "new").exists()
    with pytest.raises(RuntimeError, match="Failed to remove the directory"):
        PathManager.remove_path_safety(str(tree / "folder" / "file.txt"))  # a file is not a folder


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
