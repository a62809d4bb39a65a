"""The `host` profile's OS reserve leaves the workbench's own engines and nodes out, so a verdict on `host` does
not swing with what the workbench runs (real processes holding real anonymous memory)."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from workbench.core.config.host import detect_host, is_workbench_child, workbench_children_bytes
from workbench.core.engine.child_process import _BOOTSTRAP, _PACKAGE_ROOT

HOLD = 128 * 2**20
# allocates and touches HOLD bytes, says so, and holds them until its stdin closes
HOLDER = f"import sys; block = bytearray({HOLD}); block[::4096] = b'x' * len(block[::4096]); print('ready', flush=True); sys.stdin.read()"


@pytest.fixture
def holders():
    started = []

    def start(*argv: str) -> psutil.Process:
        child = subprocess.Popen([sys.executable, "-c", HOLDER, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
        assert child.stdout.readline().strip() == "ready"
        started.append(child)
        return psutil.Process(child.pid)

    yield start
    for child in started:
        child.stdin.close()
        child.wait(timeout=30)


def test_the_workbench_launcher_command_line_is_recognised():
    # the argv engine/child_process.start_child gives every engine, node and quantizer
    assert is_workbench_child([sys.executable, "-c", _BOOTSTRAP, _PACKAGE_ROOT, "workbench.core.engine.process", "7"])
    assert not is_workbench_child([sys.executable, "-m", "workbench", "chat", "bundled"])
    assert not is_workbench_child([sys.executable, "-c", "pass", "/x", "othertool.core.main"])


def test_only_the_workbench_childrens_memory_is_left_out(holders):
    engine_like = holders(_PACKAGE_ROOT, "workbench.core.engine.process")
    other = holders("/elsewhere", "othertool.worker")  # another program's memory stays in the reserve
    assert workbench_children_bytes([other]) == 0
    held = workbench_children_bytes([engine_like, other])
    assert 0.95 * HOLD <= held <= HOLD + 64 * 2**20  # the block, plus the interpreter's own heap


def test_the_host_profile_says_what_it_left_out():
    note = dict(detect_host().notes)["reserves_mb.os"]
    assert "except the workbench's own engines and nodes" in note and "MiB of theirs left out" in note
