"""Bench result files and tables: md, csv, json and jsonl (llama-bench's test rows), and reading them back."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.core.bench.llama_bench import MAX_TESTS, LlamaBenchTest, is_ours, pair_tests, parse_test, test_rows
from workbench.core.bench.machine import Machine, machine_from_dict
from workbench.core.bench.rows import NOISE_RULE, ROW_FIELDS, BenchRow, row_from_dict
from workbench.core.bench.split_rows import DeviceBench
from workbench.core.config.host import profile_is_this_machine
from workbench.core.errors import WorkbenchError
from workbench.core.files.regular import read_regular_file
from workbench.core.units import MIB

FORMATS = ("md", "csv", "json", "jsonl")
OLD_FILE_FORMAT = "workbench-bench/1"  # {format, machine, rows}: still read
NOT_AVAILABLE = "n/a"
MAX_RESULTS_BYTES = 64 * MIB  # larger is no bench result file: refused before it is read


@dataclass(frozen=True)
class BenchResults:
    machine: Machine
    rows: tuple[BenchRow, ...]


@dataclass(frozen=True)
class BenchFile:
    """What one results file holds: our rows (with their machine) and/or llama-bench's own tests."""

    name: str
    results: BenchResults | None
    llama_bench: tuple[LlamaBenchTest, ...] = ()


def render(results: BenchResults, fmt: str) -> str:
    writers: dict[str, Callable[[BenchResults], str]] = {
        "md": to_markdown,
        "csv": to_csv,
        "json": to_json,
        "jsonl": to_jsonl,
    }
    if fmt not in writers:
        raise WorkbenchError(f"unknown output format {fmt!r}", fix=f"use one of: {', '.join(FORMATS)}")
    return writers[fmt](results)


def to_json(results: BenchResults) -> str:
    """llama-bench's `-o json`: an array of test rows, a prompt-processing and a generation row per
    preset, each with our own fields (and the machine) beside llama-bench's."""
    tests = [test for row in results.rows for test in test_rows(row, results.machine)]
    return json.dumps(tests, indent=2) + "\n"


def to_jsonl(results: BenchResults) -> str:
    """llama-bench's `-o jsonl`: the same test rows, one JSON object per line."""
    tests = [test for row in results.rows for test in test_rows(row, results.machine)]
    return "".join(json.dumps(test) + "\n" for test in tests)


def to_csv(results: BenchResults) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("machine", *ROW_FIELDS))
    for row in results.rows:
        writer.writerow((results.machine.label, *(_csv_cell(name, getattr(row, name)) for name in ROW_FIELDS)))
    return out.getvalue()


def _csv_cell(name: str, value: Any) -> str:
    if value is None:
        return NOT_AVAILABLE
    if name in ("samples_ts", "prefill_samples_ts"):
        return ";".join(repr(x) for x in value)
    if name == "unavailable":
        return json.dumps(dict(value)) if value else ""  # reasons may hold any punctuation
    if name == "devices":
        return json.dumps([dataclasses.asdict(device) for device in value]) if value else ''
    return repr(value) if isinstance(value, float) else str(value)


# (header, field, formatter) for the markdown table; the file formats keep every field raw
MD_COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("preset", "preset", str),
    ("weights", "weights", str),
    ("model", "model_type", str),
    ("size MiB", "model_size", lambda v: f"{v / MIB:.1f}"),
    ("params M", "model_n_params", lambda v: f"{v / 1e6:.1f}"),
    ("threads", "n_threads", str),
    ("batch/ubatch", "n_batch", str),
    ("K/V", "type_k", str),
    ("FA", "flash_attn", lambda v: "yes" if v else "no"),
    ("test", "n_prompt", str),
    ("load s", "load_s", lambda v: f"{v:.2f}"),
    ("TTFT ms", "ttft_ms", lambda v: f"{v:.1f}"),
    ("prefill t/s", "prefill_tps", lambda v: f"{v:.1f}"),
    ("decode t/s", "avg_ts", lambda v: f"{v:.2f}"),
    ("peak MiB", "peak_rss_bytes", lambda v: f"{v / MIB:.1f}"),
    ("expected RSS MiB", "expected_rss_bytes", lambda v: f"{v / MIB:.1f}"),
    ("peak vs expected %", "rss_vs_expected_pct", lambda v: f"{v:+.1f}"),
    ("ledger total MiB", "predicted_bytes", lambda v: f"{v / MIB:.1f}"),
    ("KV MiB", "kv_bytes", lambda v: f"{v / MIB:.1f}"),
    ("W", "power_w", lambda v: f"{v:.2f}"),
    ("J/tok", "joules_per_token", lambda v: f"{v:.3f}"),
    ("peak °C", "peak_temp_c", lambda v: f"{v:.1f}"),
    ("throttled", "throttled", lambda v: "YES" if v else "no"),
    ("% of BW bound", "pct_of_bandwidth_bound", lambda v: f"{v:.0f}"),
    ("ppl", "ppl", lambda v: f"{v:.3f}"),
    ("Δppl", "ppl_delta", lambda v: f"{v:+.3f}"),
    ("speedup", "speedup", lambda v: f"{v:.2f}×"),
    ("vs reference", "speedup_within_noise", lambda v: "within noise" if v else "beyond noise"),
    ("decode pred t/s", "predicted_decode_tps", lambda v: f"{v:.2f}"),
    ("decode meas/pred", "decode_vs_predicted", lambda v: f"{v:.2f}"),
    ("prefill pred t/s", "predicted_prefill_tps", lambda v: f"{v:.1f}"),
    ("prefill meas/pred", "prefill_vs_predicted", lambda v: f"{v:.2f}"),
)


def md_cells(row: BenchRow, footnotes: dict[str, list[str]]) -> list[str]:
    """The row's markdown cells. An unavailable figure is 'n/a [k]': footnote k gives the reason
    (`footnotes` maps each reason to the columns it explains, numbered in order of appearance)."""
    cells = []
    for header, name, fmt in MD_COLUMNS:
        value = getattr(row, name)
        if value is None:
            reason = row.why_unavailable(name) or "not measured"
            columns = footnotes.setdefault(reason, [])
            if header not in columns:
                columns.append(header)
            cells.append(f"{NOT_AVAILABLE} [{list(footnotes).index(reason) + 1}]")
        elif name == "n_batch":
            cells.append(f"{row.n_batch}/{row.n_ubatch}")
        elif name == "type_k":
            cells.append(f"{row.type_k}/{row.type_v}")
        elif name == "n_prompt":
            cells.append(f"pp{row.n_prompt}+tg{row.n_gen}")
        elif name == "avg_ts":
            cells.append(f"{row.avg_ts:.2f} ± {row.stddev_ts:.2f}")
        else:
            cells.append(fmt(value))
    return cells


def markdown_table(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines) + "\n"


def footnote_lines(footnotes: dict[str, list[str]]) -> str:
    return "".join(
        f"[{number}] {', '.join(columns)}: {reason}\n" for number, (reason, columns) in enumerate(footnotes.items(), 1)
    )


def machine_summary(machine: Machine) -> str:
    cores = f"{machine.cores_physical or '?'} cores / {machine.cores_logical or '?'} threads"
    return (
        f"{machine.label}: {machine.cpu_model}, {cores}, {machine.ram_bytes / 2**30:.1f} GiB RAM, "
        f"{machine.os}; llama-cpp-python {machine.llama_cpp_version}"
    )


def to_markdown(results: BenchResults) -> str:
    footnotes: dict[str, list[str]] = {}
    body = [md_cells(row, footnotes) for row in results.rows]
    text = f"Machine: {machine_summary(results.machine)}\n\n"
    if not profile_is_this_machine(results.machine.device_profile, results.machine.hostname):
        text += simulated_board_note(results.machine.device_profile, results.machine.hostname) + "\n\n"
    text += markdown_table([header for header, _, _ in MD_COLUMNS], body)
    text += "".join(f"\n{line}" for line in sweep_notes(results.rows))
    if footnotes:
        text += "\n" + footnote_lines(footnotes)
    return text


def simulated_board_note(board: str, host: str) -> str:
    """What a sweep of a board profile run on another machine measured, and what is the board's."""
    return (f"{board} is a board simulated on {host}: the memory verdict is the board's, but the measured speed "
            f"(t/s, load, TTFT, power, temperature) is {host}'s; the board's own rates are the predicted columns "
            "(decode pred t/s, prefill pred t/s).")


def sweep_notes(rows: tuple[BenchRow, ...]) -> list[str]:
    """What the relative and quality columns are measured against, one line each."""
    notes = []
    if rows and rows[0].reference:
        why = f" ({rows[0].reference_why})" if rows[0].reference_why else ""
        notes.append(f"Δppl and speedup are against {rows[0].reference}{why}; vs reference: {NOISE_RULE}.\n")
    if any(row.expected_rss_bytes is not None for row in rows):
        notes.append("peak vs expected %: the engine's peak RSS against the RSS expected after load and the row's "
                     "prompt (weights, KV cache, overhead and the compute buffer that prompt writes); the ledger "
                     "total also holds the whole compute buffer, so it is what must fit, not what RSS shows.\n")
    for row in rows:
        if row.devices:
            notes.append(split_note(row))
    scored = [row for row in rows if row.ppl is not None]
    windows = sorted({row.ppl_ctx for row in scored})
    if len(windows) == 1:
        notes.append(f"ppl: {scored[0].ppl_tokens} tokens of the evaluation text in windows of {windows[0]}.\n")
    elif windows:  # a preset with a smaller context got a smaller window: its ppl is not comparable
        notes.append(f"ppl: windows differ ({', '.join(map(str, windows))} tokens: the smaller contexts'); "
                     "compare only rows with the same ppl_ctx.\n")
    return notes


def split_note(row: BenchRow) -> str:
    """A split row's devices and decode against its per-device bound, one line."""
    devices = ", ".join(
        f"{d.name}{f' {d.endpoint}' if d.endpoint else ''} {d.predicted / MIB:.1f}/"
        f"{d.reported / MIB:.1f}" if d.reported is not None else f"{d.name} {d.predicted / MIB:.1f}/n/a"
        for d in row.devices)
    bound = (f"bound {row.split_bound_tps:.1f} t/s (network {row.network_ms_per_token:.2f} ms/token)"
             if row.split_bound_tps else "bound n/a (a device's bandwidth or link is unknown)")
    return f"{row.preset}: decode {row.avg_ts:.2f} t/s vs {bound}; per device predicted/llama.cpp MiB: {devices}.\n"


def write_results(results: BenchResults, fmt: str, path: str | Path) -> Path:
    target = Path(path)
    try:
        target.write_text(render(results, fmt), encoding="utf-8")
    except OSError as error:
        raise WorkbenchError(f"cannot write results: {error.strerror}", where=str(target),
                             fix="choose a writable --out path") from error
    return target


def read_results(path: str | Path) -> BenchResults:
    """Our rows from a json or jsonl file written by the bench (format told by its content)."""
    bench_file = read_bench_file(path)
    if bench_file.results is None:
        raise WorkbenchError("llama-bench's own output holds no workbench rows", where=str(path),
                             fix="compare it with ours: `workbench bench compare ours.json llama-bench.json`")
    return bench_file.results


def read_bench_file(path: str | Path) -> BenchFile:
    """A json or jsonl file written by the bench or by llama-bench (`-o json` / `-o jsonl`)."""
    source = Path(path)
    try:
        text = read_regular_file(source, max_bytes=MAX_RESULTS_BYTES, what="a results file",
                                 fix="give a file written by `workbench bench` or llama-bench").decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise WorkbenchError(f"cannot read results: {reason}", where=str(source),
                             fix="give the path of a file written by `workbench bench --output json`") from error
    if text.startswith("machine,"):
        raise WorkbenchError("a csv result file has no machine record", where=str(source),
                             fix="compare json or jsonl files (`--output json`)")
    try:
        return parse_bench_text(text, str(source), source.name)
    except (ValueError, KeyError, TypeError, RecursionError) as error:  # '[' * 100_000: the decoder recurses per level
        raise WorkbenchError(f"not a bench result file ({str(error)[:120]})", where=str(source),
                             fix="give a file written by `workbench bench --output json` or `llama-bench -o json`") from error


def parse_bench_text(text: str, where: str = "<text>", name: str = "") -> BenchFile:
    """Our test rows, llama-bench's, or our older {format, machine, rows} document."""
    records = _records(text)
    if isinstance(records, dict):
        return BenchFile(name, _results_from_document(records))
    ours = [record for record in records if isinstance(record, dict) and is_ours(record)]
    theirs = [record for record in records if not (isinstance(record, dict) and is_ours(record))]
    results = BenchResults(*pair_tests(ours, where)) if ours else None
    tests = tuple(parse_test(record, f"{where}: test row {number}") for number, record in enumerate(theirs, 1))
    return BenchFile(name, results, tests)


def _records(text: str) -> list[Any] | dict[str, Any]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) > MAX_TESTS:
            raise ValueError(f"more than {MAX_TESTS} lines") from None
        return [json.loads(line) for line in lines]  # one json document per line
    if isinstance(document, dict):
        if "rows" not in document:
            raise ValueError("an object without rows")
        return document
    if isinstance(document, list):
        if len(document) > MAX_TESTS:
            raise ValueError(f"more than {MAX_TESTS} test rows")
        return document
    raise ValueError("the top level is neither an array of test rows nor an object")


def parse_json(text: str) -> BenchResults:
    results = parse_bench_text(text).results
    if results is None:
        raise ValueError("no workbench rows")
    return results


def _results_from_document(document: dict[str, Any]) -> BenchResults:
    return BenchResults(
        machine=machine_from_dict(document["machine"]),
        rows=tuple(row_from_dict(row) for row in document["rows"]),
    )


def parse_jsonl(text: str) -> BenchResults:
    return parse_json(text)


def parse_csv(text: str) -> tuple[tuple[str, BenchRow], ...]:
    """(machine label, row) per csv line: the inverse of to_csv."""
    hints = typing.get_type_hints(BenchRow)
    result = []
    for record in csv.DictReader(io.StringIO(text)):
        values: dict[str, Any] = {}
        for name in ROW_FIELDS:
            cell = record[name]
            values[name] = _parse_cell(name, cell, hints[name])
        result.append((record["machine"], BenchRow(**values)))
    return tuple(result)


def _parse_cell(name: str, cell: str, hint: Any) -> Any:
    if name in ("samples_ts", "prefill_samples_ts"):
        return tuple(float(x) for x in cell.split(";") if x)
    if name == "unavailable":
        return tuple(json.loads(cell).items()) if cell else ()
    if name == "devices":
        return tuple(DeviceBench(**device) for device in json.loads(cell)) if cell else ()
    if cell == NOT_AVAILABLE:
        return None
    kinds = typing.get_args(hint) or (hint,)
    if bool in kinds:
        return cell == "True"
    if int in kinds:
        return int(cell)
    if float in kinds:
        return float(cell)
    return cell
