"""Bench rows, report writers and readers, compare, soak summary and machine record (no engine)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from workbench.core.bench.compare import compare_files, comparison_markdown, merge_results
from workbench.core.bench.machine import Machine, cpu_model, describe_machine
from workbench.core.bench.report import (
    FORMATS,
    BenchResults,
    parse_csv,
    parse_json,
    parse_jsonl,
    read_results,
    render,
    write_results,
)
from workbench.core.bench.rows import BenchRow, with_references
from workbench.core.bench.soak import SoakInterval, parse_duration, soak_interval_s, summarise_soak
from workbench.core.errors import WorkbenchError
from workbench.core.preset import DeviceProfile

DEVICE = DeviceProfile(name="pi5", ram_total_mb=8192, reserves_mb=(("os", 800),), mem_bandwidth_gbs=17.0)


def _row(preset: str, model_size: int, decode: float, ppl: float | None, **changes) -> BenchRow:
    row = BenchRow(
        preset=preset, weights="Q8_0", model="m.gguf", device="pi5", model_type="llama 135M Q8_0",
        model_size=model_size, model_n_params=134_515_008, n_batch=512, n_ubatch=512, n_threads=3,
        type_k="f16", type_v="f16", flash_attn=False, n_prompt=256, n_gen=128, avg_ts=decode,
        stddev_ts=0.25, samples_ts=(decode - 0.25, decode + 0.25), load_s=0.5, ttft_ms=120.0,
        prefill_tps=900.0, prefill_stddev_tps=3.0, decode_tps=decode, timing_source="llama.cpp perf counters",
        peak_rss_bytes=200_000_000, predicted_bytes=190_000_000, prediction_error_pct=100 / 19,
        kv_bytes=47_185_920, power_w=None, joules_per_token=None, peak_temp_c=61.5, throttled=False,
        pct_of_bandwidth_bound=41.2, ppl=ppl, ppl_ctx=512, ppl_tokens=3000,
        unavailable=(("power_w", "energy counter needs root; run as root: sudo"),
                     ("joules_per_token", "energy counter needs root; run as root: sudo")),
    )
    return dataclasses.replace(row, **changes)


def _machine(label: str) -> Machine:
    return Machine(
        label=label, hostname=label.split()[0], cpu_model="Cortex-A76", cores_physical=4, cores_logical=4,
        ram_bytes=8 * 2**30, os="Linux-6.6-aarch64", python="3.11.7", device_profile="pi5",
        device_ram_total_mb=8192, device_budget_mb=7392, device_bandwidth_gbs=17.0, device_power_limit_w=None,
        llama_cpp_version="0.3.36", llama_cpp_system_info="CPU : NEON = 1 |",
    )


def _results(label: str = "pi (pi5)") -> BenchResults:
    rows = (
        _row("quality-q8", 144_000_000, 20.0, 18.5),
        _row("balanced-q4km", 100_000_000, 31.0, 19.25, weights="Q4_K_M"),
        _row("no-ppl", 90_000_000, 33.0, None, unavailable=(("ppl", "perplexity failed: boom"),)),
    )
    return BenchResults(_machine(label), with_references(rows))


def test_references_are_the_highest_precision_row():
    rows = _results().rows
    assert {row.reference for row in rows} == {"quality-q8"}
    q8, q4, no_ppl = rows
    assert (q8.ppl_delta, q8.speedup) == (0.0, 1.0)
    assert q4.ppl_delta == pytest.approx(0.75)
    assert q4.speedup == pytest.approx(31 / 20)
    assert no_ppl.ppl_delta is None and no_ppl.why_unavailable("ppl_delta") == "perplexity failed: boom"


def test_json_jsonl_and_csv_round_trip_every_field():
    results = _results()
    assert parse_json(render(results, "json")) == results
    assert parse_jsonl(render(results, "jsonl")) == results
    assert parse_csv(render(results, "csv")) == tuple((results.machine.label, row) for row in results.rows)
    document = json.loads(render(results, "json"))
    assert set(document) == {"format", "machine", "rows"}
    assert document["rows"][0]["power_w"] is None  # unavailable is null, never 0


def test_markdown_says_n_a_with_the_reason_in_a_footnote():
    text = render(_results(), "md")
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 3  # header and one line per row
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    q4 = dict(zip(header, (cell.strip() for cell in table[2].strip("|").split("|"))))
    assert q4["preset"] == "balanced-q4km"
    assert q4["Δppl"] == "+0.750" and q4["speedup"] == "1.55×"
    assert q4["W"] == q4["J/tok"] == "n/a [1]"
    assert "[1] W, J/tok: energy counter needs root; run as root: sudo" in text
    assert "perplexity failed: boom" in text
    assert " 0.00 " not in text  # nothing unavailable shows as zero


@pytest.mark.parametrize("fmt", FORMATS)
def test_write_results_writes_every_format(tmp_path, fmt):
    path = write_results(_results(), fmt, tmp_path / f"out.{fmt}")
    assert path.read_text() == render(_results(), fmt)


def test_unknown_format_and_unwritable_path_are_one_line_errors(tmp_path):
    with pytest.raises(WorkbenchError, match="unknown output format"):
        render(_results(), "xml")
    with pytest.raises(WorkbenchError, match="cannot write") as error:
        write_results(_results(), "json", tmp_path / "missing" / "out.json")
    assert "\n" not in str(error.value)


def test_compare_merges_files_from_two_machines_side_by_side(tmp_path):
    pi = write_results(_results("pi (pi5)"), "json", tmp_path / "pi.json")
    jetson = write_results(_results("jetson (orin-nano)"), "jsonl", tmp_path / "jetson.jsonl")
    comparison = compare_files([pi, jetson])
    assert [label for label, _ in comparison.machines] == ["pi (pi5)", "jetson (orin-nano)"]
    # the same preset from both machines next to each other, in the first file's preset order
    assert [(m.machine, m.row.preset) for m in comparison.rows[:4]] == [
        ("pi (pi5)", "quality-q8"), ("jetson (orin-nano)", "quality-q8"),
        ("pi (pi5)", "balanced-q4km"), ("jetson (orin-nano)", "balanced-q4km"),
    ]
    text = comparison_markdown(comparison)
    assert "| pi (pi5) | quality-q8 |" in text and "| jetson (orin-nano) | quality-q8 |" in text
    assert "- jetson (orin-nano): Cortex-A76" in text


def test_compare_keeps_two_runs_of_one_machine_apart_by_file_name():
    comparison = merge_results([_results("pi (pi5)"), _results("pi (pi5)")], ["before.json", "after.json"])
    assert [label for label, _ in comparison.machines] == ["pi (pi5) [before.json]", "pi (pi5) [after.json]"]


def test_compare_refuses_one_file_and_files_that_are_not_results(tmp_path):
    with pytest.raises(WorkbenchError, match="at least two"):
        merge_results([_results()])
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(WorkbenchError, match="not a bench result file") as error:
        read_results(bad)
    assert str(bad) in str(error.value) and "\n" not in str(error.value)
    csv_file = write_results(_results(), "csv", tmp_path / "r.csv")
    with pytest.raises(WorkbenchError, match="no machine record"):
        read_results(csv_file)
    with pytest.raises(WorkbenchError, match="cannot read"):
        read_results(tmp_path / "absent.json")


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("10m", 600), ("1h", 3600), ("1m30s", 90), ("45", 45)])
def test_soak_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "ten minutes", "10x", "0s", "-5m"])
def test_bad_soak_durations_are_one_line_errors(text):
    with pytest.raises(WorkbenchError, match="--soak"):
        parse_duration(text)


@pytest.mark.parametrize(("duration", "interval"), [(1, 1), (30, 5), (600, 30), (3600, 180)])
def test_soak_intervals_are_about_a_twentieth_and_at_least_five_seconds(duration, interval):
    assert soak_interval_s(duration) == interval


def _interval(index: int, tps: float, temp: float | None = 60.0, throttled: bool | None = False) -> SoakInterval:
    return SoakInterval(index, index * 10.0, tps, 500.0, temp, throttled, None)


def test_soak_flags_a_drop_of_more_than_ten_percent():
    result = summarise_soak("q4", [_interval(i, tps) for i, tps in enumerate([30, 30, 29, 27, 25, 24, 24, 24])], 80)
    assert result.cold_tps == 30 and result.sustained_tps == 24
    assert result.drop_pct == pytest.approx(20)
    assert result.flagged and "fell 20%" in result.verdict


def test_soak_flags_throttling_even_without_a_drop_and_names_missing_sources():
    steady = [_interval(i, 30.0, throttled=(i == 2)) for i in range(4)]
    assert summarise_soak("q4", steady, 40).flagged
    unknown = summarise_soak("q4", [_interval(i, 30.0, temp=None, throttled=None) for i in range(4)], 40)
    assert not unknown.flagged and unknown.throttled is None and unknown.peak_temp_c is None
    assert dict(unknown.unavailable)["temp_c"] == "no temperature sensor exposed"
    assert "no throttle source" in unknown.verdict


def test_machine_record_names_the_cpu_from_proc_cpuinfo(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("processor\t: 0\nmodel name\t: Test CPU 9000\n")
    assert cpu_model(str(tmp_path)) == "Test CPU 9000"
    (tmp_path / "proc/cpuinfo").write_text("processor\t: 0\nBogoMIPS\t: 108.00\n")
    (tmp_path / "proc/device-tree").mkdir()
    (tmp_path / "proc/device-tree/model").write_text("Raspberry Pi 5 Model B Rev 1.0\x00")
    assert cpu_model(str(tmp_path)) == "Raspberry Pi 5 Model B Rev 1.0"
    machine = describe_machine(DEVICE, None, root=str(tmp_path))
    assert machine.device_profile == "pi5" and machine.device_budget_mb == 7392
    assert machine.llama_cpp_version.startswith("unavailable")
