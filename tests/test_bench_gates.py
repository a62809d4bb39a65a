"""Bench comparisons against the reference the user names (default: the model file as is), said to be within
the noise from the runs' spread; --no-perplexity; --fail-below / --fail-above-ppl gating a script with exit 3."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from test_bench_report import _row

from workbench.cli.bench_speed import gate_failures
from workbench.core.bench.rows import choose_reference, with_references, within_noise
from workbench.core.errors import WorkbenchError


def _runs(row, samples):
    mean = sum(samples) / len(samples)
    spread = math.sqrt(sum((x - mean) ** 2 for x in samples) / (len(samples) - 1)) if len(samples) > 1 else 0.0
    return dataclasses.replace(row, samples_ts=tuple(samples), avg_ts=mean, stddev_ts=spread, decode_tps=mean)


def test_the_field_reports_identical_presets_are_within_the_noise():
    # 51.45 ± 3.30 against 62.59 ± 12.06 over three runs each: "speedup 1.22x" was printed as a real gain.
    # The difference, 11.14, is under twice its standard error, 2 x sqrt(3.30²/3 + 12.06²/3) = 14.44.
    a = dataclasses.replace(_row("a", 1, 51.45, None), avg_ts=51.45, stddev_ts=3.30, samples_ts=(0.0,) * 3)
    b = dataclasses.replace(_row("b", 1, 62.59, None), avg_ts=62.59, stddev_ts=12.06, samples_ts=(0.0,) * 3)
    assert within_noise(a, b) is True
    steady_slow = _runs(_row("slow", 1, 0, None), [20.1, 19.9, 20.0])
    steady_fast = _runs(_row("fast", 1, 0, None), [30.2, 29.8, 30.0])
    assert within_noise(steady_slow, steady_fast) is False
    one_run = _runs(_row("once", 1, 0, None), [30.0])
    assert within_noise(one_run, steady_fast) is None


def test_the_reference_is_the_file_as_is_not_the_largest_weights():
    # quality-q8 re-quantized from the Q4_1 file has the largest weights; the file as is is the reference
    rows = (_row("quality-q8", 144_000_000, 20.0, 18.9), _row("as-is", 92_000_000, 30.0, 18.5, weights="keep"),
            _row("q4", 80_000_000, 33.0, 19.4, weights="Q4_0"))
    assert choose_reference(rows) == (rows[1], "the model file as is")
    filled = with_references(rows)
    assert {row.reference for row in filled} == {"as-is"}
    assert filled[0].ppl_delta == pytest.approx(0.4) and filled[0].speedup == pytest.approx(20 / 30)
    assert filled[1].speedup_within_noise is None and filled[1].why_unavailable("speedup_within_noise")
    named = with_references(rows, "q4")
    assert {row.reference for row in named} == {"q4"} and named[0].reference_why == "named by --reference"
    with pytest.raises(WorkbenchError, match="--reference nope"):
        with_references(rows, "nope")
    no_file_as_is = with_references(rows[::2])
    assert no_file_as_is[0].reference == "quality-q8"
    assert no_file_as_is[0].reference_why == "the largest weights: no preset ran the model file as is"


def test_gates_name_each_row_that_misses_them():
    rows = (_row("fast", 1, 40.0, 12.0), _row("slow", 1, 8.0, 25.0), _row("unscored", 1, 50.0, None))
    assert gate_failures(rows, None, None) == []
    assert gate_failures(rows, 10.0, None) == ["slow: decode 8.00 tok/s is below --fail-below 10"]
    assert gate_failures(rows, None, 20.0) == ["slow: perplexity 25.000 is above --fail-above-ppl 20",
                                               "unscored: perplexity not measured, so --fail-above-ppl cannot pass"]


def test_a_real_sweep_without_perplexity_exits_3_below_the_bar(tmp_path, cli, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "rows.json"
    done = cli("bench", "--presets", "as-is", "-p", "16", "-n", "4", "-r", "2", "--no-perplexity",
               "--fail-below", "100000", "--output", "json", "--out", str(out))
    assert done.returncode == 3, done.stderr
    assert "perplexity" not in done.stderr.replace("--no-perplexity", "")  # no perplexity step ran
    assert "workbench: as-is: decode " in done.stderr and "is below --fail-below 100000" in done.stderr
    tests = json.loads(out.read_text())
    assert tests[0]["ppl"] is None and dict(tests[0]["unavailable"])["ppl"].endswith("--no-perplexity")


@pytest.mark.parametrize(("flags", "said"), [
    (("--no-perplexity", "--fail-above-ppl", "20"), "--fail-above-ppl needs the perplexity"),
    (("--reference", "nope"), "--reference nope is not one of this bench's presets"),
    (("--fail-below", "0"), "--fail-below 0.0 is no decode rate"),
])
def test_contradictory_or_unknown_gate_flags_are_refused_before_the_sweep(cli, flags, said):
    done = cli("bench", "--presets", "as-is", *flags)
    assert done.returncode == 2 and said in done.stderr and done.stderr.count("\n") == 1, done.stderr
