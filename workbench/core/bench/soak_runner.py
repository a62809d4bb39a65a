"""Runs a soak for one preset in a fresh engine process, sampling telemetry between intervals."""

from __future__ import annotations

from collections.abc import Iterator

from workbench.core.bench.soak import SoakInterval, SoakResult, soak
from workbench.core.bench.sweep import SweepConfig, load_preset_engine
from workbench.core.config.preset import Preset
from workbench.core.engine.measured import SpeedMeasured
from workbench.core.telemetry.sampler import Sampler

SOAK_PROMPT_MAX = 32  # a short prompt: the soak is about sustained decode


def soak_preset(config: SweepConfig, preset: Preset, seconds: float) -> Iterator[SoakInterval | SoakResult]:
    """Load `preset`, warm up, then generate back to back for `seconds` (see soak.soak)."""
    client = load_preset_engine(config, preset)
    try:
        n_prompt = min(config.n_prompt, SOAK_PROMPT_MAX)
        client.run_op("bench", n_prompt=n_prompt, n_gen=1, seed=config.seed)  # warm-up

        def run_bench(p: int, n: int) -> SpeedMeasured:
            return client.run_op("bench", n_prompt=p, n_gen=n, seed=config.seed)

        with Sampler(root=config.telemetry_root, engine_pid=client.pid) as sampler:
            yield from soak(preset.name, run_bench, sampler.sample, seconds, n_prompt=n_prompt, n_gen=config.n_gen)
    finally:
        client.close()
