"""A model path that is no regular file says what it is, and a FIFO never blocks (issue 10, item 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gguf_factory import write_tiny_gguf
from workbench.core.errors import GGUFError, WorkbenchError
from workbench.core.gguf.reader import read_gguf
from workbench.core.files.model_ref import resolve_model

# A blocked open() would hang the child for ever; this bound only turns that into a failure.
HANG_BOUND_S = 120


@pytest.fixture()
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    os.mkfifo(path)
    return path


def _resolve_error(spec: str) -> str:
    with pytest.raises(WorkbenchError) as caught:
        resolve_model(spec)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(spec)
    return message


def test_special_files_are_named_for_what_they_are(tmp_path: Path, fifo: Path):
    assert "is a named pipe (FIFO)" in _resolve_error(str(fifo))
    assert "is a character device (like /dev/zero)" in _resolve_error("/dev/zero")
    loop_a, loop_b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    loop_a.symlink_to(loop_b)
    loop_b.symlink_to(loop_a)
    assert "is a symbolic link loop" in _resolve_error(str(loop_a))
    dangling = tmp_path / "gone.gguf"
    dangling.symlink_to(tmp_path / "deleted.gguf")
    assert f"is a symbolic link to {tmp_path / 'deleted.gguf'}, which does not exist" in _resolve_error(str(dangling))
    assert "is a directory, not a model file" in _resolve_error(str(tmp_path))
    assert "no such model file" in _resolve_error(str(tmp_path / "nothing.gguf"))
    # and a real file through a link still resolves
    real = write_tiny_gguf(tmp_path / "real.gguf")
    link = tmp_path / "link.gguf"
    link.symlink_to(real)
    assert resolve_model(str(link)) == link


def test_the_reader_refuses_devices_without_reading_them(tmp_path: Path):
    with pytest.raises(GGUFError) as caught:
        read_gguf("/dev/zero")  # used to be "the file is empty (0 bytes)"
    assert "/dev/zero: is a character device" in str(caught.value)
    loop = tmp_path / "self.gguf"
    loop.symlink_to(loop)
    with pytest.raises(GGUFError) as caught:
        read_gguf(loop)
    assert "is a symbolic link loop" in str(caught.value)


def test_reading_a_fifo_does_not_wait_for_a_writer(fifo: Path):
    # read_gguf is the first thing every command and the engine's load plan do with a path;
    # a plain open() of a FIFO waits for a writer that never comes.
    code = ("import sys; from workbench.core.gguf.reader import read_gguf; from workbench.core.errors import GGUFError\n"
            "try:\n    read_gguf(sys.argv[1])\nexcept GGUFError as error:\n    print(error)\n")
    done = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=HANG_BOUND_S)
    assert done.returncode == 0 and f"{fifo}: is a named pipe (FIFO)" in done.stdout, done.stderr


def test_cli_names_a_fifo_in_one_line(fifo: Path):
    done = subprocess.run([sys.executable, "-m", "workbench.cli.main", "inspect", str(fifo)], capture_output=True,
                          text=True, timeout=HANG_BOUND_S)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "is a named pipe (FIFO)" in done.stderr
