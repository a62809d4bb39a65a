"""Power, energy per token, temperature and throttling in bench rows, read from recorded /sys trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.core.bench.sweep import PresetMeasured, SweepConfig, SweepFinished, SweepStepStarted, run_sweep
from workbench.core.bench.sweep import shipped_eval_text
from workbench.core.devices import load_device
from workbench.core.paths import bundled_model_path
from workbench.core.preset import Preset
from workbench.core.telemetry.sampler import Sampler

TREES = Path(__file__).parent / "sysfs"


def _sweep(tree: str, device: str) -> tuple[list, SweepFinished]:
    config = SweepConfig(
        model_path=bundled_model_path(),
        presets=(Preset(name="small", ctx_size=128),),
        device=load_device(device),
        n_prompt=8,
        n_gen=8,
        repetitions=1,
        eval_text=shipped_eval_text()[:200],
        ppl_ctx=32,
        telemetry_root=str(TREES / tree),
    )
    events = list(run_sweep(config))
    assert isinstance(events[-1], SweepFinished)
    return events, events[-1]


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))


def test_a_jetson_tree_gives_power_energy_per_token_and_temperature():
    events, finished = _sweep("jetson-orin-nano", "jetson-orin-nano-8gb")
    [row] = finished.results.rows
    recorded = Sampler(root=TREES / "jetson-orin-nano").sample()
    assert row.power_w == pytest.approx(recorded.total_power_w, rel=0.02)  # the VDD_IN rail
    assert row.joules_per_token == pytest.approx(row.power_w / row.decode_tps)
    assert row.peak_temp_c == max(t.celsius for t in recorded.temperatures)
    assert row.throttled is False
    # the Orin Nano profile's bandwidth bounds decode: the share is a real percentage
    assert 0 < row.pct_of_bandwidth_bound < 100
    assert "power_w" not in dict(row.unavailable)
    steps = [e.step for e in events if isinstance(e, SweepStepStarted)]
    assert steps == ["load", "warm-up", "run 1/1", "perplexity"]
    assert [e.row for e in events if isinstance(e, PresetMeasured)][0].preset == "small"


def test_a_throttled_pi_without_power_rails_says_why_power_is_missing():
    _, finished = _sweep("raspberry-pi-5", "raspberry-pi-5-8gb")
    [row] = finished.results.rows
    assert row.throttled is True and row.peak_temp_c == pytest.approx(84.8)
    assert row.power_w is None and row.joules_per_token is None
    assert row.why_unavailable("power_w") == row.why_unavailable("joules_per_token") == "no power source here"
