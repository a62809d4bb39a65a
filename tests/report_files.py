"""Bench result files for the report tests: two devices (this machine and a Raspberry Pi 5 profile simulated on
it), written as `workbench bench --output json` writes them, with figures the tests know independently."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from workbench.core.bench.machine import Machine
from workbench.core.bench.report import BenchResults, to_json
from workbench.core.bench.rows import BenchRow

MIB = 1 << 20
HOSTNAME = socket.gethostname()
# (preset, decode, decode stddev, ppl, peak MiB, predicted decode): the host's rows
HOST_ROWS = (("quality-q8", 40.0, 1.0, 10.0, 300, 45.0), ("balanced-q4km", 60.0, 1.5, 10.3, 250, 62.0),
             ("edge-int4-kv8", 61.0, 2.0, 10.9, 240, 64.0))
BOARD_ROWS = (("quality-q8", 40.5, 1.0, 10.0, 300, 8.0), ("balanced-q4km", 59.0, 1.5, 10.3, 250, 12.0))
HOST_BUDGET_MB, BOARD_BUDGET_MB = 6000, 270


def machine(profile: str, budget_mb: int) -> Machine:
    return Machine(label=f"{HOSTNAME} ({profile})", hostname=HOSTNAME, cpu_model="Test CPU", cores_physical=2,
                   cores_logical=4, ram_bytes=8 << 30, os="Linux", python="3.11", device_profile=profile,
                   device_ram_total_mb=8192, device_budget_mb=budget_mb, device_bandwidth_gbs=20.0,
                   device_power_limit_w=None, llama_cpp_version="0.3.36", llama_cpp_system_info="CPU : AVX2 = 1")


def row(preset: str, decode: float, stddev: float, ppl: float, peak_mib: int, predicted: float | None) -> BenchRow:
    return BenchRow(
        preset=preset, weights="Q4_K_M", model="m.gguf", device="host", model_type="llama 135M",
        model_size=100 * MIB, model_n_params=135_000_000, n_batch=512, n_ubatch=512, n_threads=2, type_k="f16",
        type_v="f16", flash_attn=False, n_prompt=64, n_gen=32, avg_ts=decode, stddev_ts=stddev,
        samples_ts=(decode - stddev, decode, decode + stddev),  # three runs: this mean and sample deviation
        load_s=0.5, ttft_ms=20.0, prefill_tps=decode * 8, prefill_stddev_tps=1.0, decode_tps=decode,
        timing_source="llama.cpp perf counters", peak_rss_bytes=peak_mib * MIB, predicted_bytes=(peak_mib - 5) * MIB,
        prediction_error_pct=1.0, kv_bytes=10 * MIB, power_w=None, joules_per_token=None, peak_temp_c=55.5,
        throttled=False, pct_of_bandwidth_bound=None, ppl=ppl, ppl_ctx=512, ppl_tokens=1000, ppl_delta=ppl - 10.0,
        reference="quality-q8", predicted_decode_tps=predicted,
        predicted_prefill_tps=predicted * 9 if predicted else None,
        unavailable=(("joules_per_token", "no power source on this machine"),), preset_toml=f'name = "{preset}"\n')


def write_pair(folder: Path) -> tuple[Path, Path]:
    host = BenchResults(machine("host", HOST_BUDGET_MB), tuple(row(*spec) for spec in HOST_ROWS))
    board = BenchResults(machine("raspberry-pi-5-8gb", BOARD_BUDGET_MB), tuple(row(*spec) for spec in BOARD_ROWS))
    paths = folder / "host.json", folder / "pi5.json"
    paths[0].write_text(to_json(host), encoding="utf-8")
    paths[1].write_text(to_json(board), encoding="utf-8")
    return paths


def edited(path: Path, target: Path, change: dict[str, Any], rows: slice = slice(None)) -> Path:
    """The bench file at `path` with `change` applied to its test rows (a hostile file is a real one, edited)."""
    records = json.loads(path.read_text())
    for record in records[rows]:
        record.update(change)
    target.write_text(json.dumps(records), encoding="utf-8")  # json writes NaN as NaN, as a hostile writer may
    return target
