"""The engine processes' log files: in the user's state folder, one per process, the oldest pruned.

A log outlives its engine on purpose (the client reads its tail after a crash), and a client
that is killed cannot delete it. So logs live under `paths.state_dir()/logs`, never in the
temp folder, and every new one first prunes the folder: the newest KEEP_LOGS files stay, and
older ones go once the folder passes MAX_LOGS_BYTES. A log whose client process still runs
is never pruned (its pid is in the name), whatever its age.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

from workbench.core import paths
from workbench.core.units import MIB

KEEP_LOGS = 20
MAX_LOGS_BYTES = 64 * MIB
MAX_LOG_FILE_BYTES = 16 * MIB  # one log restarts from empty past this (see LlamaLog)
_LOG_NAME = re.compile(r"^[a-z]+-\d{8}-\d{6}-(\d+)-[0-9a-f]{6}\.log$")


def logs_dir() -> Path:
    return paths.state_dir() / "logs"


def new_log_file(kind: str) -> str:
    """Create an empty, private log file for a new `kind` process ("engine") and return its path.

    The folder is pruned first (see the module docstring).
    """
    folder = logs_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    prune_logs(folder)
    name = f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}.log"
    path = folder / name
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    return str(path)


def prune_logs(folder: Path, *, keep: int = KEEP_LOGS, max_bytes: int = MAX_LOGS_BYTES) -> tuple[Path, ...]:
    """Delete logs of finished clients beyond the newest `keep`, or beyond `max_bytes` in total; what was deleted."""
    logs = []
    for path in folder.glob("*.log"):
        match = _LOG_NAME.match(path.name)
        if match is None or _client_running(int(match.group(1))):
            continue  # not ours, or its client may still read it
        try:
            info = path.stat()
        except OSError:
            continue
        logs.append((info.st_mtime, info.st_size, path))
    logs.sort(reverse=True)  # newest first
    deleted, total = [], 0
    for index, (_, size, path) in enumerate(logs):
        total += size
        if index >= keep or total > max_bytes:
            path.unlink(missing_ok=True)
            deleted.append(path)
    return tuple(deleted)


def _client_running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: not ours to judge
    return True
