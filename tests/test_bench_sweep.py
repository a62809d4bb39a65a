"""`workbench bench` end to end: a three-preset sweep of the bundled model in real engine processes."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from cli_runner import run_cli

from workbench.cli.main import main
from workbench.core.bench.report import BenchResults, parse_csv, parse_json, parse_jsonl, read_results, render
from workbench.core.bench.rows import ROW_FIELDS
from workbench.core.bench.sweep import shipped_eval_text

PRESETS = {
    # the file's own Q4_1 weights with an f16 cache; the same with a q8_0 cache (needs flash
    # attention); and Q4_0 weights re-quantized by the engine, with smaller batches
    "keep-f16": 'weights = "keep"\nctx_size = 256\n',
    "keep-kv8": 'weights = "keep"\nctx_size = 256\ncache_type_k = "q8_0"\ncache_type_v = "q8_0"\nflash_attn = true\n',
    "q4-0": 'weights = "Q4_0"\nctx_size = 256\nbatch_size = 64\nubatch_size = 64\n',
}


@pytest.fixture(scope="module")
def bench_env(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WORKBENCH_CONFIG_DIR", str(folder / "config"))
        patch.setenv("WORKBENCH_CACHE_DIR", str(folder / "cache"))
        preset_files = []
        for name, body in PRESETS.items():
            path = folder / f"{name}.toml"
            path.write_text(f'name = "{name}"\n{body}')
            preset_files.append(str(path))
        eval_file = folder / "eval.txt"
        eval_file.write_text(shipped_eval_text()[:450])  # ~95 tokens keeps the test short
        yield folder, preset_files, eval_file


@pytest.fixture(scope="module")
def sweep(bench_env):
    folder, preset_files, eval_file = bench_env
    out = folder / "results.json"
    code, stdout, stderr = run_cli(
        "bench", "--model", "bundled", "--presets", ",".join(preset_files), "--device", "host",
        "-p", "16", "-n", "8", "-r", "2", "--ppl-ctx", "64", "--eval-text", str(eval_file),
        "--output", "json", "--out", str(out), "--soak", "1s",
    )
    return code, stdout, stderr, read_results(out)


def test_a_three_preset_sweep_measures_every_preset(sweep):
    code, _, stderr, results = sweep
    assert code == 0, stderr
    assert [row.preset for row in results.rows] == list(PRESETS)
    for row in results.rows:
        assert (row.n_prompt, row.n_gen, len(row.samples_ts)) == (16, 8, 2)
        assert row.avg_ts == pytest.approx(sum(row.samples_ts) / 2)
        assert row.decode_tps > 0 and row.prefill_tps > 0 and row.ttft_ms > 0 and row.load_s > 0
        assert row.peak_rss_bytes > row.model_size  # the weights are resident, plus the KV cache
        assert row.predicted_bytes > 0 and math.isfinite(row.prediction_error_pct)
        assert row.ppl > 1 and row.ppl_ctx == 64 and row.ppl_tokens > 60
        assert row.reference == "keep-f16"  # Q4_1 weights are the largest here
    keep, kv8, q4 = results.rows
    assert (kv8.type_k, kv8.type_v, kv8.flash_attn) == ("q8_0", "q8_0", True)
    assert kv8.kv_bytes < keep.kv_bytes  # an 8-bit cache is about half the f16 one
    assert (q4.n_batch, q4.n_ubatch) == (64, 64) and "Q4_0" in q4.model_type
    assert q4.model_size < keep.model_size
    assert keep.ppl_delta == 0 and keep.speedup == 1
    assert q4.ppl_delta == pytest.approx(q4.ppl - keep.ppl)
    assert results.machine.llama_cpp_version and "CPU" in results.machine.llama_cpp_system_info


def test_peak_rss_is_compared_with_the_rss_expected_for_the_rows_prompt(sweep):
    _, stdout, _, results = sweep
    for row in results.rows:
        # the OS's peak RSS of the engine against the RSS expected after load and a pp16 prompt: like with like
        assert abs(row.rss_vs_expected_pct) < 10, (row.preset, row.peak_rss_bytes, row.expected_rss_bytes)
        expected_pct = (row.peak_rss_bytes - row.expected_rss_bytes) / row.expected_rss_bytes * 100
        assert row.rss_vs_expected_pct == pytest.approx(expected_pct)
        # the ledger total (kept as predicted_bytes) also holds the compute buffer a short prompt never writes
        assert row.expected_rss_bytes < row.predicted_bytes
        assert row.reference == "keep-f16" and row.reference_why == "the model file as is"
    assert "| peak vs expected % |" in stdout and "| ledger total MiB |" in stdout and "pred err %" not in stdout
    assert "against keep-f16 (the model file as is); vs reference: within the noise:" in stdout


def test_rows_carry_the_builds_commit_and_the_backends_that_held_layers(sweep, bench_env):
    import ctypes

    import llama_cpp

    folder = bench_env[0]
    library = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))  # read here, apart
    library.ggml_commit.restype = ctypes.c_char_p
    commit = library.ggml_commit().decode()
    assert commit.startswith("0c1e570")  # llama-cpp-python 0.3.36's vendored llama.cpp
    _, _, _, results = sweep
    assert {(row.build_commit, row.backends) for row in results.rows} == {(commit, "CPU")}
    tests = json.loads((folder / "results.json").read_text())
    assert {(test["build_commit"], test["backends"]) for test in tests} == {(commit, "CPU")}
    assert tests[0]["build_number"] is None and "vendored" in dict(tests[0]["unavailable"])["build_number"]


def test_backends_name_each_kind_of_device_that_held_weights():
    from types import SimpleNamespace

    from workbench.core.bench.build_rows import backends_of
    from workbench.core.engine.events import DeviceBuffers

    split = SimpleNamespace(devices=(DeviceBuffers("CPU", model_bytes=10), DeviceBuffers("RPC0", "127.0.0.1:50052", 5),
                                     DeviceBuffers("RPC1", "127.0.0.1:50053", 5), DeviceBuffers("CUDA0", model_bytes=0)))
    assert backends_of(split) == "CPU,RPC"  # a device that holds no weights is no backend of the run


def test_every_row_is_complete_each_figure_measured_or_explained(sweep):
    results = sweep[3]
    for row in results.rows:
        for name in ROW_FIELDS:
            if getattr(row, name) is None:
                assert row.why_unavailable(name), f"{row.preset}.{name} is unavailable without a reason"


def test_the_table_goes_to_stdout_and_the_progress_to_stderr(sweep):
    _, stdout, stderr, results = sweep
    assert "| preset |" in stdout and all(f"| {row.preset} |" in stdout for row in results.rows)
    assert "perplexity" in stderr and "run 2/2" in stderr and "q4-0: quantizing" in stderr
    # the perplexity step reports each scored window (~95 tokens, windows of 64: two of them)
    assert all(f"{row.preset}: perplexity 100%" in stderr for row in results.rows)
    for line in stdout.splitlines():
        if line.startswith("[") and "]" in line:
            assert ": " in line  # footnotes say which column and why


@pytest.mark.parametrize("fmt", ["md", "csv", "json", "jsonl"])
def test_every_output_format_parses_back(sweep, fmt):
    results: BenchResults = sweep[3]
    text = render(results, fmt)
    if fmt == "json":
        assert parse_json(text) == results
    elif fmt == "jsonl":
        assert parse_jsonl(text) == results
        # llama-bench's jsonl: a pp and a tg test row per preset, each with the machine beside (issue 12)
        lines = text.splitlines()
        assert len(lines) == 2 * len(results.rows) and all("machine" in json.loads(line) for line in lines)
    elif fmt == "csv":
        assert [row for _, row in parse_csv(text)] == list(results.rows)
    else:
        lines = [line for line in text.splitlines() if line.startswith("| ")]
        header = [cell.strip() for cell in lines[0].strip("| ").split(" | ")]
        for line, row in zip(lines[1:], results.rows, strict=True):
            cells = dict(zip(header, (cell.strip() for cell in line.strip("| ").split(" | ")), strict=True))
            assert cells["preset"] == row.preset
            assert cells["ppl"] == f"{row.ppl:.3f}"
            assert cells["decode t/s"] == f"{row.avg_ts:.2f} ± {row.stddev_ts:.2f}"


def test_compare_merges_result_files_from_two_machines(sweep, bench_env):
    folder = bench_env[0]
    results: BenchResults = sweep[3]
    other = dataclasses.replace(results.machine, label="jetson (orin-nano)", hostname="jetson", cpu_model="ARMv8")
    second = folder / "jetson.json"
    second.write_text(render(BenchResults(other, results.rows), "json"))
    code, stdout, _ = run_cli("bench", "compare", str(folder / "results.json"), str(second))
    assert code == 0
    assert results.machine.label in stdout and "jetson (orin-nano): ARMv8" in stdout
    side, every = stdout.split("Every test:")
    beside = [line for line in side.splitlines() if line.startswith("| ")]
    assert len(beside) == 1 + 2 * len(results.rows)  # a pp and a tg line per preset, the machines in columns
    assert f"| {results.machine.label} t/s | jetson (orin-nano) t/s |" in beside[0] and "ppl |" in beside[0]
    table = [line for line in every.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 2 * 2 * len(results.rows)  # two machines, a pp and a tg test per preset (issue 12)
    assert table[1].startswith(f"| {results.machine.label} | keep-f16 |")
    assert table[2].startswith("| jetson (orin-nano) | keep-f16 |")


def test_bad_bench_input_is_one_line(bench_env, capsys):
    assert main(["bench", "--presets", "no-such-preset", "-p", "8"]) == 2
    assert main(["bench", "--presets", bench_env[1][0], "--soak", "ten minutes"]) == 2
    assert main(["bench", "compare", str(bench_env[0] / "missing.json"), str(bench_env[0] / "m2.json")]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and all(line.startswith("workbench: ") for line in errors)


def test_soak_prints_decode_and_temperature_over_time_per_preset(sweep):
    stdout = sweep[1]
    for name in PRESETS:
        section = stdout.split(f"Soak {name} for 1 s:")[1].split("Soak ")[0]
        rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| t s")]
        assert rows and all(float(line.split(" | ")[1]) > 0 for line in rows)  # decode tok/s per interval
        verdict = [line for line in section.splitlines() if line.removeprefix("WARNING: ").startswith(f"{name}: ")]
        assert len(verdict) == 1
        for line in section.splitlines():
            if line.startswith("n/a "):
                assert ": " in line  # an unavailable column names its reason


def test_an_unwritable_out_or_empty_presets_is_refused_before_the_sweep(bench_env, tmp_path):
    preset = bench_env[1][0]
    code, out, err = run_cli("bench", "--presets", preset, "--out", str(tmp_path / "no-folder" / "r.json"))
    assert code == 2 and out == ""  # was: the whole sweep ran, then the write failed
    assert err == f"workbench: {tmp_path / 'no-folder'}: no such folder for --out. create it first or choose another --out path\n"
    code, out, err = run_cli("bench", "--presets", preset, "--out", str(tmp_path))
    assert code == 2 and err.startswith(f"workbench: {tmp_path}: is a folder, not a file.")
    code, out, err = run_cli("bench", "--presets", ",,")
    assert code == 2 and err == "workbench: bench: --presets ',,' names no preset. pass --presets a,b,c (see `workbench presets`)\n"
