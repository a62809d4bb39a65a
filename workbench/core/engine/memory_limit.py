"""The engine's address-space limit (RLIMIT_AS) from the ledger, so a memory bomb kills only the engine.

The limit is set in the engine process, before llama.cpp loads, as its soft limit (a later load
in the same process may raise it again, up to the hard limit). It counts what the process has
mapped already (Python, llama.cpp's libraries: measured, not guessed), the model file (mmap'd
weights are address space even when not resident), the ledger's prediction again (weights
repacked for the CPU are a copy; KV, compute, overhead), a stack and a malloc arena per thread,
and a generous margin. A GPU backend is exempt: CUDA and its peers reserve address ranges far
beyond any memory they use, so RLIMIT_AS would refuse them at start.
"""

from __future__ import annotations

import ctypes
import resource
from pathlib import Path

from workbench.core.engine.backends import loaded_backends
from workbench.core.units import MIB

MARGIN_BYTES = 512 * MIB  # on top of everything below: allocations the ledger does not list
MARGIN_FRACTION = 0.25  # and a quarter of the prediction, for its error band
PER_THREAD_BYTES = 80 * MIB  # an 8 MiB stack and a malloc arena (capped at 2 arenas while limited)
_M_ARENA_MAX = -8  # glibc's mallopt parameter
_STATM_MAX_BYTES = 4096
_OUT_OF_MEMORY = ("failed to allocate", "bad_alloc", "memoryerror", "cannot allocate memory", "out of memory",
                  "unable to allocate")


def mapped_bytes() -> int | None:
    """This process's address space now (/proc/self/statm's first field), None where unreadable."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            fields = statm.read(_STATM_MAX_BYTES).split()
        pages = int(fields[0])
    except (OSError, ValueError, IndexError):
        return None
    return pages * resource.getpagesize() if 0 < pages < 1 << 40 else None


def address_limit(budget_bytes: int, model_path: Path, threads: int, already_mapped: int) -> int:
    """RLIMIT_AS for an engine about to load `model_path` under a ledger predicting `budget_bytes`."""
    file_bytes = model_path.stat().st_size
    return (already_mapped + file_bytes + budget_bytes + max(1, threads) * PER_THREAD_BYTES
            + MARGIN_BYTES + int(MARGIN_FRACTION * (file_bytes + budget_bytes)))


def apply_limit(budget_bytes: int | None, model_path: Path, threads: int, gpu_backend: bool) -> int:
    """Set the engine's soft RLIMIT_AS before a load; the limit in bytes, or 0 when none applies
    (no ledger prediction, e.g. an RPC split; a GPU backend; nothing measurable)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if budget_bytes is None or budget_bytes < 0 or gpu_backend:
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_AS, (hard, hard))  # a previous load's limit does not carry over
        return 0
    mapped = mapped_bytes()
    if mapped is None:
        return 0
    limit = address_limit(budget_bytes, model_path, threads, mapped)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 2)  # one arena per thread would reserve 64 MiB each
    except (OSError, AttributeError):
        pass
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return limit


def out_of_limit(message: str, log_tail: tuple[str, ...], limit_bytes: int) -> str:
    """The one line for a failure that ran into the limit ("" when it does not look like one)."""
    if not limit_bytes:
        return ""
    text = " ".join((message, *log_tail)).lower()
    if not any(sign in text for sign in _OUT_OF_MEMORY):
        return ""
    return f"the engine ran out of its memory limit ({limit_bytes / MIB:,.0f} MiB): {message}"


def gpu_backend_loaded() -> bool:
    """Whether the loaded llama.cpp has a GPU backend with devices (then no limit is set)."""
    return bool(loaded_backends().gpu_devices)
