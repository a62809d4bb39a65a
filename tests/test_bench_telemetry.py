"""Power, energy per token, temperature and throttling in bench rows, read from recorded /sys trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.core.bench.sweep import (
    PresetMeasured,
    SweepConfig,
    SweepFinished,
    SweepStepStarted,
    run_sweep,
    shipped_eval_text,
)
from workbench.core.config.devices import load_device
from workbench.core.config.preset import Preset
from workbench.core.paths import bundled_model_path

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
    # VDD_IN on the recorded tree: in1_input 5048 mV x curr1_input 920 mA = 4_644_160 µW = 4.64416 W, steady
    assert row.power_w == pytest.approx(4.64416, rel=1e-6)
    assert row.joules_per_token == pytest.approx(4.64416 / row.decode_tps, rel=1e-6)  # J/token = W / (token/s)
    # hottest zones of the tree: gpu-thermal and tj-thermal 48625 m°C (cpu 47687, soc0 47468, soc1 48250,
    # soc2 46718; cv0-cv2 read -256000: off)
    assert row.peak_temp_c == 48.625
    assert row.throttled is False
    # the Orin Nano profile's bandwidth bounds decode: the share is a real percentage
    assert 0 < row.pct_of_bandwidth_bound < 100
    assert "power_w" not in dict(row.unavailable)
    started = [e for e in events if isinstance(e, SweepStepStarted)]
    steps = [e.step for e in started if e.fraction == 0]
    assert steps == ["load", "warm-up", "run 1/1", "perplexity"]
    # after its start, the perplexity step reports each scored window, ending with the whole text
    within = [e.fraction for e in started if e.fraction > 0]
    assert within and all(e.step == "perplexity" for e in started if e.fraction > 0)
    assert within == sorted(within) and within[-1] == pytest.approx(1.0)
    assert [e.row for e in events if isinstance(e, PresetMeasured)][0].preset == "small"


def test_a_jetson_nano_bench_peak_is_not_the_fixed_pmic_die_100c():
    # huataihuang/cloud-atlas (tests/sysfs/README.md): AO-therm 41.5 is the hottest real sensor; PMIC-Die reads 100.0
    _, finished = _sweep("jetson-nano", "jetson-orin-nano-8gb")
    [row] = finished.results.rows
    assert row.peak_temp_c == 41.5


def test_a_row_carries_llama_bench_fields_for_its_test_rows():
    import json
    import re

    from workbench.core.bench.report import render

    _, finished = _sweep("empty-container", "jetson-orin-nano-8gb")
    [row] = finished.results.rows
    assert len(row.prefill_samples_ts) == 1 and row.prefill_samples_ts[0] == row.prefill_tps  # one timed run
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row.test_time)
    assert (row.n_gpu_layers, row.split_mode, row.tensor_split, row.use_mmap) == (0, "layer", "0.00", True)
    pp, tg = json.loads(render(finished.results, "json"))
    assert (pp["n_prompt"], pp["n_gen"], tg["n_gen"], tg["n_depth"]) == (8, 0, 8, 8)
    # llama-bench's samples_ns: 8 tokens at r tokens/s take 8 / r seconds
    assert pp["samples_ns"] == [round(8 / row.prefill_samples_ts[0] * 1e9)]
    assert tg["samples_ns"] == [round(8 / row.samples_ts[0] * 1e9)]


def test_a_throttled_pi_without_power_rails_says_why_power_is_missing():
    _, finished = _sweep("raspberry-pi-5", "raspberry-pi-5-8gb")
    [row] = finished.results.rows
    # cpu-thermal 82900 m°C: the temp=82.9'C of a throttling Pi 5 (tests/sysfs/raspberry-pi-5/SOURCES.md)
    assert row.throttled is True and row.peak_temp_c == pytest.approx(82.9)
    assert row.power_w is None and row.joules_per_token is None
    assert row.why_unavailable("power_w") == row.why_unavailable("joules_per_token") == "no power source here"
