"""Architecture files written once per test session, each caller given its own copy.

The writers are deterministic in (model, seed), and gguf's writer packs a vocabulary value by
value: gemma3's 262,144 tokens take about a second to write, and the suite writes the same
families from some eighty places. conftest.py names the session's cache folder in
WORKBENCH_TEST_GGUF_CACHE (xdist workers inherit it); without it every call writes afresh.
A copy, not a link: tests that damage a file damage only theirs.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

CACHE_VARIABLE = "WORKBENCH_TEST_GGUF_CACHE"


def cached_writer(write: Callable[..., Path]) -> Callable[..., Path]:
    """write(path, model, *, seed) memoized on disk by the writer, repr(model) and seed."""

    @functools.wraps(write)
    def cached(path: Path, model: Any, *, seed: int = 0) -> Path:
        root = os.environ.get(CACHE_VARIABLE, "")
        if not root:
            return write(path, model, seed=seed)
        key = hashlib.sha256(f"{write.__module__}.{write.__qualname__}|{model!r}|{seed}".encode()).hexdigest()[:32]
        stored = Path(root) / f"{key}.gguf"
        if not stored.is_file():
            partial = stored.with_name(f"{key}.{os.getpid()}.partial")
            write(partial, model, seed=seed)
            os.replace(partial, stored)  # a second worker writing the same key replaces it with the same bytes
        shutil.copyfile(stored, path)
        return Path(path)

    return cached
