"""Bench result files and tables: md, csv, json ({machine, rows}) and jsonl, and reading them back."""

from __future__ import annotations

import csv
import io
import json
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.core.bench.machine import Machine, machine_from_dict, machine_to_dict
from workbench.core.bench.rows import ROW_FIELDS, BenchRow, row_from_dict, row_to_dict
from workbench.core.errors import WorkbenchError

FORMATS = ("md", "csv", "json", "jsonl")
FILE_FORMAT = "workbench-bench/1"
NOT_AVAILABLE = "n/a"
MIB = 1024 * 1024


@dataclass(frozen=True)
class BenchResults:
    machine: Machine
    rows: tuple[BenchRow, ...]


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
    document = {
        "format": FILE_FORMAT,
        "machine": machine_to_dict(results.machine),
        "rows": [row_to_dict(row) for row in results.rows],
    }
    return json.dumps(document, indent=2) + "\n"


def to_jsonl(results: BenchResults) -> str:
    # every line stands alone, like llama-bench's jsonl: the row plus the machine it ran on
    machine = machine_to_dict(results.machine)
    lines = [json.dumps({**row_to_dict(row), "machine": machine}) for row in results.rows]
    return "".join(line + "\n" for line in lines)


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
    if name == "samples_ts":
        return ";".join(repr(x) for x in value)
    if name == "unavailable":
        return json.dumps(dict(value)) if value else ""  # reasons may hold any punctuation
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
    ("predicted MiB", "predicted_bytes", lambda v: f"{v / MIB:.1f}"),
    ("pred err %", "prediction_error_pct", lambda v: f"{v:+.1f}"),
    ("KV MiB", "kv_bytes", lambda v: f"{v / MIB:.1f}"),
    ("W", "power_w", lambda v: f"{v:.2f}"),
    ("J/tok", "joules_per_token", lambda v: f"{v:.3f}"),
    ("peak °C", "peak_temp_c", lambda v: f"{v:.1f}"),
    ("throttled", "throttled", lambda v: "YES" if v else "no"),
    ("% of BW bound", "pct_of_bandwidth_bound", lambda v: f"{v:.0f}"),
    ("ppl", "ppl", lambda v: f"{v:.3f}"),
    ("Δppl", "ppl_delta", lambda v: f"{v:+.3f}"),
    ("speedup", "speedup", lambda v: f"{v:.2f}×"),
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
    text += markdown_table([header for header, _, _ in MD_COLUMNS], body)
    text += "".join(f"\n{line}" for line in sweep_notes(results.rows))
    if footnotes:
        text += "\n" + footnote_lines(footnotes)
    return text


def sweep_notes(rows: tuple[BenchRow, ...]) -> list[str]:
    """What the relative and quality columns are measured against, one line each."""
    notes = []
    if rows and rows[0].reference:
        notes.append(f"Δppl and speedup are against {rows[0].reference} (the largest weights in this sweep).\n")
    scored = [row for row in rows if row.ppl is not None]
    windows = sorted({row.ppl_ctx for row in scored})
    if len(windows) == 1:
        notes.append(f"ppl: {scored[0].ppl_tokens} tokens of the evaluation text in windows of {windows[0]}.\n")
    elif windows:  # a preset with a smaller context got a smaller window: its ppl is not comparable
        notes.append(f"ppl: windows differ ({', '.join(map(str, windows))} tokens: the smaller contexts'); "
                     "compare only rows with the same ppl_ctx.\n")
    return notes


def write_results(results: BenchResults, fmt: str, path: str | Path) -> Path:
    target = Path(path)
    try:
        target.write_text(render(results, fmt), encoding="utf-8")
    except OSError as error:
        raise WorkbenchError(f"cannot write results: {error.strerror}", where=str(target),
                             fix="choose a writable --out path") from error
    return target


def read_results(path: str | Path) -> BenchResults:
    """Read a json, jsonl or csv result file written by the bench (format told by its content)."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as error:
        raise WorkbenchError(f"cannot read results: {error.strerror}", where=str(source),
                             fix="give the path of a file written by `workbench bench --output json`") from error
    try:
        try:
            document = json.loads(text)
        except json.JSONDecodeError:
            if text.startswith("machine,"):
                raise WorkbenchError("a csv result file has no machine record", where=str(source),
                                     fix="compare json or jsonl files (`--output json`)") from None
            return parse_jsonl(text)  # one json document per line
        if not isinstance(document, dict):
            raise ValueError("the top level is not an object")
        return _results_from_document(document) if "rows" in document else parse_jsonl(text)
    except (ValueError, KeyError, TypeError) as error:
        raise WorkbenchError(f"not a bench result file ({error})", where=str(source),
                             fix="give a file written by `workbench bench --output json`") from error


def parse_json(text: str) -> BenchResults:
    return _results_from_document(json.loads(text))


def _results_from_document(document: dict[str, Any]) -> BenchResults:
    return BenchResults(
        machine=machine_from_dict(document["machine"]),
        rows=tuple(row_from_dict(row) for row in document["rows"]),
    )


def parse_jsonl(text: str) -> BenchResults:
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not lines:
        raise ValueError("no rows")
    return BenchResults(machine=machine_from_dict(lines[0]["machine"]), rows=tuple(row_from_dict(x) for x in lines))


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
    if name == "samples_ts":
        return tuple(float(x) for x in cell.split(";") if x)
    if name == "unavailable":
        return tuple(json.loads(cell).items()) if cell else ()
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
