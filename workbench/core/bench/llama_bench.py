"""llama-bench's JSON/JSONL schema: our rows written as its test rows (pp, tg) and its own files read back."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from workbench.core.bench.machine import Machine, machine_from_dict, machine_to_dict
from workbench.core.bench.rows import ROW_FIELDS, BenchRow, row_from_dict, row_to_dict
from workbench.core.errors import WorkbenchError

# The fields of llama-bench's json/jsonl printer (tools/llama-bench/llama-bench.cpp, test::get_fields and
# get_field_type) that a run of ours can fill, in its order, with its types: ints are JSON integers,
# bools true/false, avg_ts/stddev_ts floats, samples_ns/samples_ts arrays. flash_attn is an int as the
# current printer writes it (-1 auto, 0 off, 1 on); older llama-bench wrote a bool, which is read too.
FIELD_TYPES: dict[str, type] = {
    "build_commit": str, "build_number": int, "cpu_info": str, "gpu_info": str, "backends": str,
    "model_filename": str, "model_type": str, "model_size": int, "model_n_params": int,
    "n_batch": int, "n_ubatch": int, "n_threads": int, "type_k": str, "type_v": str,
    "n_gpu_layers": int, "split_mode": str, "main_gpu": int, "no_kv_offload": bool, "flash_attn": int,
    "tensor_split": str, "use_mmap": bool, "embeddings": bool,
    "n_prompt": int, "n_gen": int, "n_depth": int, "test_time": str,
    "avg_ns": int, "stddev_ns": int, "avg_ts": float, "stddev_ts": float, "samples_ns": list, "samples_ts": list,
}
TEST_KEY = "workbench_test"  # "pp" or "tg": which half of one of our rows a test row is
# Fields of ours that llama-bench also has: in a test row they hold that test's llama-bench value.
_SHARED = set(FIELD_TYPES) & set(ROW_FIELDS)
_REQUIRED = ("model_type", "n_prompt", "n_gen", "avg_ts", "stddev_ts")
MAX_TESTS = 100_000  # a results file with more test rows than this is refused, not read into memory


@dataclass(frozen=True)
class LlamaBenchTest:
    """One test row of a file llama-bench wrote itself (or of ours, seen the same way)."""

    model_type: str
    model_filename: str
    model_size: int | None
    model_n_params: int | None
    backends: str
    cpu_info: str
    gpu_info: str
    n_threads: int | None
    n_batch: int | None
    n_ubatch: int | None
    type_k: str
    type_v: str
    flash_attn: str  # "on", "off", "auto" or "" when the file does not say
    n_gpu_layers: int | None
    n_prompt: int
    n_gen: int
    n_depth: int
    avg_ts: float
    stddev_ts: float
    n_samples: int
    build_commit: str

    @property
    def test(self) -> str:
        """llama-bench's own name for the test: "pp512", "tg128", "pp512+tg128", "tg128 @ d512"."""
        if self.n_prompt and self.n_gen:
            name = f"pp{self.n_prompt}+tg{self.n_gen}"
        else:
            name = f"pp{self.n_prompt}" if self.n_prompt else f"tg{self.n_gen}"
        return f"{name} @ d{self.n_depth}" if self.n_depth else name

    @property
    def machine_label(self) -> str:
        return " + ".join(part for part in (self.cpu_info, self.gpu_info) if part) or "unknown machine"


def test_rows(row: BenchRow, machine: Machine) -> list[dict[str, Any]]:
    """The prompt-processing and the generation test of one preset, each a llama-bench row with our
    own fields beside its fields (and the machine), so each row stands alone like llama-bench's."""
    ours = {key: value for key, value in row_to_dict(row).items() if key not in _SHARED}
    pp = _test(row, machine, n_prompt=row.n_prompt, n_gen=0, n_depth=0,
               avg_ts=row.prefill_tps, stddev_ts=row.prefill_stddev_tps, samples_ts=row.prefill_samples_ts)
    # Our generation runs right after the prompt: llama-bench calls that a tg test at depth n_prompt.
    tg = _test(row, machine, n_prompt=0, n_gen=row.n_gen, n_depth=row.n_prompt,
               avg_ts=row.avg_ts, stddev_ts=row.stddev_ts, samples_ts=row.samples_ts)
    return [{**pp, **ours, TEST_KEY: "pp", "machine": machine_to_dict(machine)},
            {**tg, **ours, TEST_KEY: "tg", "machine": machine_to_dict(machine)}]


def _test(row: BenchRow, machine: Machine, *, n_prompt: int, n_gen: int, n_depth: int,
          avg_ts: float, stddev_ts: float, samples_ts: tuple[float, ...]) -> dict[str, Any]:
    tokens = n_prompt + n_gen
    samples_ns = [round(tokens / ts * 1e9) for ts in samples_ts if ts > 0]
    if samples_ns:
        avg_ns: int | None = round(statistics.fmean(samples_ns))
        stddev_ns: int | None = round(statistics.stdev(samples_ns)) if len(samples_ns) > 1 else 0
    else:  # a row written before the per-run prompt rates were kept: the mean alone is known
        avg_ns, stddev_ns = (round(tokens / avg_ts * 1e9) if avg_ts > 0 else None), None
    return {
        "build_commit": row.build_commit or None,  # ggml_commit() of the engine's library; null when unknown
        "build_number": None,  # a commit count of llama.cpp's git history: a vendored build has none
        "cpu_info": machine.cpu_model,
        "gpu_info": "",
        "backends": row.backends or None,  # the devices that held layers (bench/build_rows.py)
        "model_filename": row.model,
        "model_type": row.model_type,
        "model_size": row.model_size,
        "model_n_params": row.model_n_params,
        "n_batch": row.n_batch,
        "n_ubatch": row.n_ubatch,
        "n_threads": row.n_threads,
        "type_k": row.type_k,
        "type_v": row.type_v,
        "n_gpu_layers": row.n_gpu_layers,
        "split_mode": row.split_mode or None,
        "main_gpu": row.main_gpu,
        "no_kv_offload": False,
        "flash_attn": 1 if row.flash_attn else 0,
        "tensor_split": row.tensor_split or None,
        "use_mmap": row.use_mmap,
        "embeddings": False,
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "n_depth": n_depth,
        "test_time": row.test_time or None,
        "avg_ns": avg_ns,
        "stddev_ns": stddev_ns,
        "avg_ts": avg_ts,
        "stddev_ts": stddev_ts,
        "samples_ns": samples_ns,
        "samples_ts": list(samples_ts),
    }


def utc_at_monotonic(moment: float) -> str:
    """time.monotonic() `moment` (the engine's clock is the system's) as llama-bench's test_time."""

    wall = time.time() - (time.monotonic() - moment)
    return datetime.fromtimestamp(wall, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def preset_placement(preset: Any) -> dict[str, Any]:
    """The llama-bench fields a preset sets: where layers go, and mmap (for BenchRow)."""
    split = "/".join(f"{share:.2f}" for share in preset.tensor_split)
    return {
        "n_gpu_layers": preset.gpu_layers if preset.gpu_layers is not None else 0,  # llama.cpp's default
        "split_mode": preset.split_mode,
        "main_gpu": preset.main_gpu,
        "tensor_split": split or "0.00",
        "use_mmap": preset.mmap,
    }


def is_ours(record: dict[str, Any]) -> bool:
    return TEST_KEY in record


def row_from_tests(pp: dict[str, Any], tg: dict[str, Any]) -> tuple[Machine, BenchRow]:
    """Inverse of test_rows: our row back from its two test rows."""
    data = {key: value for key, value in tg.items() if key in ROW_FIELDS and key not in _SHARED}
    for key in _SHARED:
        if key in tg:
            data[key] = tg[key]
    data["flash_attn"] = bool(tg.get("flash_attn"))
    data["n_prompt"] = pp["n_prompt"]
    data["prefill_samples_ts"] = pp.get("samples_ts", [])
    data["n_gpu_layers"] = tg.get("n_gpu_layers")
    data["split_mode"] = tg.get("split_mode") or ""
    data["tensor_split"] = tg.get("tensor_split") or ""
    data["test_time"] = tg.get("test_time") or ""
    data["build_commit"] = tg.get("build_commit") or ""  # null in the file: not known
    data["backends"] = tg.get("backends") or ""
    return machine_from_dict(tg["machine"]), row_from_dict(data)


def pair_tests(records: list[dict[str, Any]], where: str) -> tuple[Machine, tuple[BenchRow, ...]]:
    """Our test rows, two per preset (pp then tg), back into rows; the machine of the first."""
    pending: dict[str, dict[str, Any]] = {}
    rows: list[BenchRow] = []
    machine: Machine | None = None
    for number, record in enumerate(records, start=1):
        preset, kind = record.get("preset"), record.get(TEST_KEY)
        if not isinstance(preset, str) or kind not in ("pp", "tg"):
            raise WorkbenchError(f"test row {number} names no preset and pp/tg", where=where,
                                 fix="give a file written by `workbench bench --output json|jsonl`")
        if kind == "pp":
            pending[preset] = record
            continue
        if preset not in pending:
            raise WorkbenchError(f"test row {number}: the tg row of {preset} has no pp row before it", where=where,
                                 fix="give the whole file written by `workbench bench`")
        row_machine, row = row_from_tests(pending.pop(preset), record)
        machine = machine or row_machine
        rows.append(row)
    if pending:
        raise WorkbenchError(f"the pp row of {next(iter(pending))} has no tg row", where=where,
                             fix="give the whole file written by `workbench bench`")
    if machine is None:
        raise WorkbenchError("no test rows", where=where, fix="give a file written by `workbench bench`")
    return machine, tuple(rows)


def parse_test(record: Any, where: str) -> LlamaBenchTest:
    """One llama-bench test row, its fields checked against the printer's types (the file is outside data)."""
    if not isinstance(record, dict):
        raise WorkbenchError("a test row is not a JSON object", where=where, fix="give llama-bench -o json or -o jsonl output")
    missing = [key for key in _REQUIRED if key not in record]
    if missing:
        raise WorkbenchError(f"a test row lacks {', '.join(missing)}", where=where,
                             fix="give llama-bench -o json or -o jsonl output")

    def text(key: str) -> str:
        value = record.get(key)
        if value is None:
            return ""
        if not isinstance(value, str) or len(value) > 1000:
            raise WorkbenchError(f"{key} is not a short string", where=where, fix="give llama-bench output")
        return value

    def integer(key: str, required: bool = False) -> int | None:
        value = record.get(key)
        if value is None and not required:
            return None
        if isinstance(value, str) and value.lstrip("-").isdigit() and len(value) < 20:
            value = int(value)  # llama-bench's csv writes every cell as a string
        if isinstance(value, bool) or not isinstance(value, int) or not -(2**63) < value < 2**64:
            raise WorkbenchError(f"{key} = {str(value)[:30]!r} is not an integer", where=where, fix="give llama-bench output")
        return value

    def number(key: str) -> float:
        value = record.get(key)
        try:
            # A JSON integer has no size limit: 10**400 parses, and float() of it overflows.
            rate = math.nan if isinstance(value, bool) or not isinstance(value, int | float) else float(value)
        except OverflowError:
            rate = math.inf
        if not math.isfinite(rate) or rate < 0:
            raise WorkbenchError(f"{key} = {str(value)[:30]!r} is not a rate", where=where, fix="give llama-bench output")
        return rate

    samples = record.get("samples_ts", [])
    if not isinstance(samples, list):
        raise WorkbenchError("samples_ts is not a list", where=where, fix="give llama-bench output")
    counts = [integer(key, required=True) or 0 for key in ("n_prompt", "n_gen")]
    if any(count < 0 for count in counts):
        raise WorkbenchError("a token count is negative", where=where, fix="give llama-bench output")
    return LlamaBenchTest(
        model_type=text("model_type"), model_filename=text("model_filename"),
        model_size=integer("model_size"), model_n_params=integer("model_n_params"),
        backends=text("backends") or text("backend"), cpu_info=text("cpu_info"), gpu_info=text("gpu_info"),
        n_threads=integer("n_threads"), n_batch=integer("n_batch"), n_ubatch=integer("n_ubatch"),
        type_k=text("type_k"), type_v=text("type_v"), flash_attn=_flash_attn(record.get("flash_attn"), where),
        n_gpu_layers=integer("n_gpu_layers"), n_prompt=counts[0], n_gen=counts[1], n_depth=integer("n_depth") or 0,
        avg_ts=number("avg_ts"), stddev_ts=number("stddev_ts"), n_samples=len(samples),
        build_commit=text("build_commit"),
    )


def _flash_attn(value: Any, where: str) -> str:
    """bool (llama-bench before the auto mode), int -1/0/1 (since), or absent."""
    if value is None:
        return ""
    if value is True or value == 1:
        return "on"
    if value is False or value == 0:
        return "off"
    if value == -1:
        return "auto"
    raise WorkbenchError(f"flash_attn = {str(value)[:20]!r} is neither a bool nor -1/0/1", where=where,
                         fix="give llama-bench output")
