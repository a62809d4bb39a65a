"""Engine logs live in the user's state folder with rotation, and a killed client's log is pruned (issue 10, item 8)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.core.engine.log_capture import LlamaLog
from workbench.core.engine.log_files import logs_dir, new_log_file, prune_logs
from workbench.core.engine.log_tail import read_log_tail

WAIT_BOUND_S = 120  # only turns a hang into a failure; nothing here is timed


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "state"
    monkeypatch.setenv("WORKBENCH_STATE_DIR", str(folder))
    return folder


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _old_log(folder: Path, pid: int, age_s: int, size: int = 10) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() - age_s))
    path = folder / f"engine-{stamp}-{pid}-{age_s:06x}.log"
    path.write_bytes(b"x" * size)
    os.utime(path, (time.time() - age_s, time.time() - age_s))
    return path


def test_new_logs_go_to_the_state_folder_and_old_ones_are_pruned(state_dir: Path):
    folder = state_dir / "logs"
    folder.mkdir(parents=True)
    dead = _dead_pid()
    finished = [_old_log(folder, dead, age) for age in range(100, 125)]  # 25 logs of killed clients, newest first
    running = _old_log(folder, os.getpid(), 10_000)  # oldest of all, but its client (us) still runs
    stranger = folder / "notes.log"
    stranger.write_text("not an engine log")
    path = Path(new_log_file("engine"))
    assert path.parent == logs_dir() == folder
    assert path.stat().st_size == 0 and path.stat().st_mode & 0o777 == 0o600
    kept = set(folder.glob("*.log"))
    assert kept == set(finished[:20]) | {running, stranger, path}


def test_without_an_override_logs_follow_the_xdg_state_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("WORKBENCH_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    assert logs_dir() == tmp_path / "xdg-state" / "edge-llm-workbench" / "logs"


def test_pruning_bounds_the_folder_size(state_dir: Path):
    folder = state_dir / "logs"
    folder.mkdir(parents=True)
    dead = _dead_pid()
    logs = [_old_log(folder, dead, age, size=1000) for age in (1, 2, 3, 4)]
    deleted = prune_logs(folder, keep=20, max_bytes=2500)
    assert set(deleted) == set(logs[2:]) and all(path.exists() for path in logs[:2])


def test_one_log_file_restarts_instead_of_growing_without_bound(tmp_path: Path):
    path = tmp_path / "engine.log"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        log = LlamaLog(fd, max_file_bytes=1000)
        for index in range(200):  # ~40 bytes each: 8 kB written in all
            log.write_note(f"line {index:04d}")
    finally:
        os.close(fd)
    assert path.stat().st_size <= 1000
    tail = read_log_tail(path, 2)
    assert tail[-1].endswith("line 0199")  # the file always ends with the latest lines
    assert "restarted here" in path.read_text().splitlines()[0]


def test_a_killed_clients_log_is_left_in_the_state_folder_and_pruned_later(state_dir: Path):
    # The client process is SIGKILLed right after starting its engine: nothing can delete the
    # log then. It must sit under the state folder (not /tmp) and go with the next pruning.
    script = ("import os, signal, sys\n"
              "from workbench.core.engine.client import EngineClient\n"
              "client = EngineClient(); client.start()\n"
              "print(client.log_path, client.pid, flush=True)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT_BOUND_S)
    assert done.returncode == -signal.SIGKILL, done.stderr
    log_path, engine_pid = done.stdout.split()
    try:
        assert Path(log_path).parent == state_dir / "logs" and Path(log_path).exists()
    finally:
        _stop(int(engine_pid))  # it notices its client is gone on its own; do not leave it to chance
    assert prune_logs(state_dir / "logs", keep=0) == (Path(log_path),)


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
