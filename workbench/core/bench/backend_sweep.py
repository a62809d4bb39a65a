"""A backend sweep: each preset with every layer on the CPU (gpu_layers 0) and on the GPU (all), side by side."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from workbench.core.config.preset import Preset
from workbench.core.config.preset_split import ALL_LAYERS
from workbench.core.engine.backends import LoadedBackends
from workbench.core.errors import WorkbenchError

BACKEND_LAYERS = {"cpu": 0, "gpu": ALL_LAYERS}  # what --backends cpu,gpu sets gpu_layers to


@dataclasses.dataclass(frozen=True)
class BackendPlan:
    presets: tuple[Preset, ...]  # in row order: each preset's variants next to each other
    refused: tuple[tuple[str, str], ...]  # (variant name, why it is not run)


def parse_backends(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(part.strip().lower() for part in text.split(",") if part.strip()))
    bad = [name for name in names if name not in BACKEND_LAYERS]
    if bad or not names:
        raise WorkbenchError(f"--backends {text!r} names {', '.join(bad) or 'nothing'}", where="bench",
                             fix="give --backends cpu,gpu (cpu: gpu_layers = 0, gpu: every layer on the GPU)")
    return names


def backend_plan(presets: Sequence[Preset], backends: Sequence[str], loaded: LoadedBackends,
                 rebuild_hint: str) -> BackendPlan:
    """The presets to run, one variant per backend; a gpu variant is refused when llama.cpp has no GPU device."""
    gpus = loaded.gpu_devices if loaded.available else ()
    out, refused = [], []
    for preset in presets:
        for backend in backends:
            variant = dataclasses.replace(preset, name=f"{preset.name}@{backend}", gpu_layers=BACKEND_LAYERS[backend])
            if backend == "gpu" and not gpus and not preset.rpc:  # RPC nodes take the layers too
                have = ", ".join(loaded.names) if loaded.available else loaded.reason
                refused.append((variant.name, f"not run: the loaded llama.cpp has no GPU device ({have}); "
                                              f"gpu_layers = all would run on the CPU. {rebuild_hint}"))
                continue
            out.append(variant)
    return BackendPlan(tuple(out), tuple(refused))
