"""A bench row's llama-bench build fields from the engine that ran it: the build's commit, and the backends
of the devices that held the model's layers (not a fixed "CPU": an RPC split or a GPU shows as such)."""

from __future__ import annotations

import dataclasses
import re

from workbench.core.bench.rows import BenchRow
from workbench.core.engine.events import Loaded
from workbench.core.engine.measured import EngineFacts

_DEVICE_NUMBER = re.compile(r"\d+$")


def backends_of(loaded: Loaded | None) -> str:
    """llama.cpp's backend names of the devices that hold model weights, host first ("CPU", "CPU,RPC")."""
    names: list[str] = []
    for device in loaded.devices if loaded is not None else ():
        backend = _DEVICE_NUMBER.sub("", device.name) or device.name  # "RPC0" -> "RPC", "CUDA0" -> "CUDA"
        if device.model_bytes > 0 and backend not in names:
            names.append(backend)
    return ",".join(names)


def with_build(row: BenchRow, facts: EngineFacts | None, loaded: Loaded | None) -> BenchRow:
    notes = dict(row.unavailable)
    commit = facts.build_commit if facts is not None else ""
    if not commit:
        notes["build_commit"] = "the loaded llama.cpp library does not say its commit (no ggml_commit)"
    backends = backends_of(loaded)
    if not backends:
        notes["backends"] = "llama.cpp logged no model buffer per device at load"
    # llama-bench's build_number counts the commits of llama.cpp's own git history, which a
    # library built from a vendored tree (llama-cpp-python) does not have
    notes["build_number"] = "not in a library built from a vendored llama.cpp tree (no git history to count)"
    return dataclasses.replace(row, build_commit=commit, backends=backends, unavailable=tuple(notes.items()))
