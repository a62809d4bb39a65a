"""Bench rows, report writers and readers, compare, soak summary and machine record (no engine)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pathlib import Path

from workbench.core.bench.compare import compare_files, comparison_markdown, merge_results
from workbench.core.bench.llama_bench import FIELD_TYPES
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
from workbench.core.config.preset import DeviceProfile

DEVICE = DeviceProfile(name="pi5", ram_total_mb=8192, reserves_mb=(("os", 800),), mem_bandwidth_gbs=17.0)


def _row(preset: str, model_size: int, decode: float, ppl: float | None, **changes) -> BenchRow:
    row = BenchRow(
        preset=preset, weights="Q8_0", model="m.gguf", device="pi5", model_type="llama 135M Q8_0",
        model_size=model_size, model_n_params=134_515_008, n_batch=512, n_ubatch=512, n_threads=3,
        type_k="f16", type_v="f16", flash_attn=False, n_prompt=256, n_gen=128, avg_ts=decode,
        stddev_ts=0.25, samples_ts=(decode - 0.25, decode + 0.25), load_s=0.5, ttft_ms=120.0,
        prefill_tps=900.0, prefill_stddev_tps=3.0, decode_tps=decode, timing_source="llama.cpp perf counters",
        peak_rss_bytes=200_000_000, predicted_bytes=190_000_000, prediction_error_pct=100 / 19,
        expected_rss_bytes=195_000_000, rss_vs_expected_pct=500 / 195,
        kv_bytes=47_185_920, power_w=None, joules_per_token=None, peak_temp_c=61.5, throttled=False,
        pct_of_bandwidth_bound=41.2, ppl=ppl, ppl_ctx=512, ppl_tokens=3000,
        prefill_samples_ts=(896.0, 904.0), n_gpu_layers=0, split_mode="layer", main_gpu=0, tensor_split="0.00",
        use_mmap=True, test_time="2026-11-30T09:00:00Z",
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
    tests = json.loads(render(results, "json"))
    assert len(tests) == 2 * 3  # a pp and a tg test per preset, as llama-bench writes them
    assert tests[0]["power_w"] is None  # unavailable is null, never 0


def test_json_rows_follow_llama_bench_schema_and_types():
    tests = json.loads(render(_results(), "json"))
    pp, tg = tests[0], tests[1]
    for test in (pp, tg):
        assert list(test)[: len(FIELD_TYPES)] == list(FIELD_TYPES)  # llama-bench's fields first, in its order
        for name, kind in FIELD_TYPES.items():
            value = test[name]
            assert value is None or (isinstance(value, kind) and not (kind is int and isinstance(value, bool))), name
        assert test["preset"] == "quality-q8" and test["machine"]["label"] == "pi (pi5)"  # ours beside
    # pp256: two runs at 896 and 904 prompt tokens/s. 256 / 896 s = 285_714_286 ns, 256 / 904 s = 283_185_841 ns.
    assert (pp["n_prompt"], pp["n_gen"], pp["n_depth"]) == (256, 0, 0)
    assert pp["samples_ns"] == [285_714_286, 283_185_841]
    assert pp["avg_ns"] == 284_450_064  # (285_714_286 + 283_185_841) / 2 = 284_450_063.5, rounded
    assert (pp["avg_ts"], pp["stddev_ts"], pp["samples_ts"]) == (900.0, 3.0, [896.0, 904.0])
    # tg128 after the 256-token prompt: depth 256. 128 / 19.75 s = 6_481_012_658 ns, 128 / 20.25 s = 6_320_987_654 ns.
    assert (tg["n_prompt"], tg["n_gen"], tg["n_depth"]) == (0, 128, 256)
    assert tg["samples_ns"] == [6_481_012_658, 6_320_987_654]
    assert (tg["avg_ts"], tg["samples_ts"]) == (20.0, [19.75, 20.25])
    assert (pp["flash_attn"], pp["use_mmap"], pp["n_gpu_layers"], pp["build_commit"]) == (0, True, 0, None)
    lines = render(_results(), "jsonl").splitlines()
    assert [json.loads(line) for line in lines] == tests


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
    # the same model and test from both machines next to each other
    assert [(line.machine, line.run, line.test.test) for line in comparison.lines[:4]] == [
        ("pi (pi5)", "quality-q8", "pp256"), ("jetson (orin-nano)", "quality-q8", "pp256"),
        ("pi (pi5)", "balanced-q4km", "pp256"), ("jetson (orin-nano)", "balanced-q4km", "pp256"),
    ]
    assert len(comparison.lines) == 2 * 2 * 3  # two machines, three presets, a pp and a tg test each
    text = comparison_markdown(comparison)
    assert "| pi (pi5) | quality-q8 | llama 135M Q8_0 |" in text and "| jetson (orin-nano) | quality-q8 |" in text
    assert "- jetson (orin-nano): Cortex-A76" in text


LLAMA_BENCH = Path(__file__).parent / "llama_bench"  # ggml-org/llama.cpp tools/llama-bench/README.md (see its README)


@pytest.mark.parametrize("name", ["qwen2.5-7b-rtx4080.json", "qwen2.5-7b-rtx4080.jsonl"])
def test_compare_reads_llama_bench_output_beside_ours(tmp_path, name):
    ours = write_results(_results("pi (pi5)"), "json", tmp_path / "pi.json")
    comparison = compare_files([ours, LLAMA_BENCH / name])
    theirs = [line for line in comparison.lines if line.run == "llama-bench"]
    assert [(line.test.test, line.test.avg_ts, line.test.stddev_ts) for line in theirs] == [
        ("pp512", 7100.002165, 140.341520), ("tg128", 118.881588, 1.041811)
    ]
    label = "AMD Ryzen 7 7800X3D 8-Core Processor + NVIDIA GeForce RTX 4080 (llama-bench)"
    assert [machine for machine, _ in comparison.machines] == ["pi (pi5)", label]
    text = comparison_markdown(comparison)
    every_test = text.split("Every test:")[1]  # below the side-by-side table
    row = next(line for line in every_test.splitlines() if "| llama-bench |" in line and "tg128" in line)
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    # 4677120000 / 2**20 = 4460.4 MiB, 7615616512 / 1e6 = 7615.6 M params; flash_attn -1 is "auto"
    assert cells[:12] == [label, "llama-bench", "qwen2 7B Q4_K - Medium", "4460.4", "7615.6", "CUDA", "8",
                          "2048/512", "f16/f16", "auto", "tg128", "118.88 ± 1.04"]
    assert cells[12].startswith("n/a [")  # power: llama-bench does not measure it
    assert "llama-bench does not measure it" in text


def test_compare_reads_older_llama_bench_bool_flash_attn(tmp_path):
    tests = json.loads((LLAMA_BENCH / "qwen2.5-7b-rtx4080.json").read_text())
    for test in tests:
        test["flash_attn"] = True  # llama-bench wrote a bool before its auto mode (changed here by hand)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(tests))
    comparison = compare_files([LLAMA_BENCH / "qwen2.5-7b-rtx4080.json", old])
    assert [line.test.flash_attn for line in comparison.lines] == ["auto", "on", "auto", "on"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[{"model_type": "x", "n_prompt": "many", "n_gen": 0, "avg_ts": 1, "stddev_ts": 0}]', "n_prompt = 'many' is not an integer"),
        ('[{"model_type": "x", "n_prompt": 1, "n_gen": 0, "avg_ts": -5, "stddev_ts": 0}]', "avg_ts = '-5' is not a rate"),
        ('[{"model_type": "x", "n_prompt": 1, "n_gen": 0}]', "a test row lacks avg_ts, stddev_ts"),
        ('[{"model_type": "x", "n_prompt": 1, "n_gen": 0, "avg_ts": 1, "stddev_ts": 0, "flash_attn": "yes"}]', "flash_attn"),
        ("[1, 2]", "a test row is not a JSON object"),
        ('"text"', "not a bench result file"),
    ],
)
def test_hostile_llama_bench_files_are_one_line_errors(tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(WorkbenchError, match=message) as error:
        compare_files([LLAMA_BENCH / "qwen2.5-7b-rtx4080.json", bad])
    assert "\n" not in str(error.value) and str(bad) in str(error.value)


def test_an_oversized_results_file_is_refused_before_reading(tmp_path):
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as handle:
        handle.truncate(65 * 2**20)  # sparse: 65 MiB of nothing
    with pytest.raises(WorkbenchError, match="too large for a results file"):
        read_results(huge)


def test_older_workbench_files_are_still_read(tmp_path):
    results = _results()
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"format": "workbench-bench/1", "machine": dataclasses.asdict(results.machine),
                               "rows": [json.loads(json.dumps(dataclasses.asdict(row))) for row in results.rows]}))
    assert [row.preset for row in read_results(old).rows] == ["quality-q8", "balanced-q4km", "no-ppl"]


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
    with pytest.raises(WorkbenchError, match="holds no workbench rows"):
        read_results(LLAMA_BENCH / "qwen2.5-7b-rtx4080.json")


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


def test_compare_puts_the_machines_in_columns_and_keeps_perplexity(tmp_path):
    pi = write_results(_results("pi (pi5)"), "json", tmp_path / "pi.json")
    faster = BenchResults(_machine("jetson (orin-nano)"), with_references((
        _row("quality-q8", 144_000_000, 40.0, 18.3), _row("balanced-q4km", 100_000_000, 62.0, 19.0, weights="Q4_K_M"))))
    jetson = write_results(faster, "json", tmp_path / "jetson.json")
    text = comparison_markdown(compare_files([pi, jetson]))
    assert "| model | run | test | pi (pi5) t/s | jetson (orin-nano) t/s | pi (pi5) ppl | jetson (orin-nano) ppl |" in text
    # one line per preset and test, each machine's figure in its own column
    assert "| llama 135M Q8_0 | quality-q8 | tg128 @ d256 | 20.00 ± 0.25 | 40.00 ± 0.25 | 18.500 | 18.300 |" in text
    assert "| llama 135M Q8_0 | no-ppl | tg128 @ d256 | 33.00 ± 0.25 | — | n/a | — |" in text  # not run there
    detail = next(line for line in text.splitlines() if line.startswith("| jetson (orin-nano) | balanced-q4km"))
    assert detail.rstrip(" |").endswith("19.000")  # the every-test table keeps perplexity too
