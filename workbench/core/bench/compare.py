"""Merge bench result files (ours and llama-bench's own) from several machines into one side-by-side table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.core.bench.llama_bench import LlamaBenchTest, parse_test, test_rows
from workbench.core.bench.report import (
    MIB,
    NOT_AVAILABLE,
    BenchFile,
    BenchResults,
    footnote_lines,
    machine_summary,
    markdown_table,
    read_bench_file,
)
from workbench.core.bench.rows import BenchRow
from workbench.core.errors import WorkbenchError

NOT_IN_LLAMA_BENCH = "llama-bench does not measure it"
PER_GENERATED_TOKEN = "energy is per generated token: see the tg line"


@dataclass(frozen=True)
class TestLine:
    """One test (pp, tg, pp+tg) of one run: llama-bench's figures, and ours where the run was ours."""

    machine: str  # the machine's label, made unique across the merged files
    run: str  # "quality-q8" (our preset) or "llama-bench"
    test: LlamaBenchTest
    row: BenchRow | None = None  # our row the test belongs to: power, energy, heat, memory


@dataclass(frozen=True)
class Comparison:
    machines: tuple[tuple[str, str], ...]  # (unique label, one-line summary) in file order
    lines: tuple[TestLine, ...]  # grouped by model and test, machines in file order within a group

    @property
    def rows(self) -> tuple[TestLine, ...]:
        return self.lines


def merge_files(files: Sequence[BenchFile]) -> Comparison:
    """Every test of every file, the same model and test on different machines next to each other.

    Two files from one machine (a before/after run) get the file name added to their label."""
    if len(files) < 2:
        raise WorkbenchError("compare needs at least two result files", fix="give two or more .json/.jsonl files")
    base_labels = [_file_label(bench_file) for bench_file in files]
    labels = [
        f"{label} [{bench_file.name or index + 1}]" if base_labels.count(label) > 1 else label
        for index, (label, bench_file) in enumerate(zip(base_labels, files))
    ]
    lines: list[TestLine] = []
    machines: list[tuple[str, str]] = []
    for label, bench_file in zip(labels, files):
        if bench_file.results is not None:
            machine = bench_file.results.machine
            machines.append((label, machine_summary(machine).replace(machine.label, label, 1)))
            for row in bench_file.results.rows:
                for record in test_rows(row, machine):
                    lines.append(TestLine(label, row.preset, parse_test(record, bench_file.name), row))
        if bench_file.llama_bench:
            first = bench_file.llama_bench[0]
            if bench_file.results is None:
                commit = f" build {first.build_commit}" if first.build_commit else ""
                machines.append((label, f"{label}: llama-bench{commit}, {first.backends or 'backend not named'}"))
            lines += [TestLine(label, "llama-bench", test) for test in bench_file.llama_bench]
    # Grouped by model and test, then by run (the same preset of every machine together), then file order.
    groups = list(dict.fromkeys((line.test.model_type, line.test.test) for line in lines))
    runs = list(dict.fromkeys(line.run for line in lines))
    ordered = sorted(lines, key=lambda line: (groups.index((line.test.model_type, line.test.test)),
                                              runs.index(line.run)))  # stable: file order within
    return Comparison(tuple(machines), tuple(ordered))


def _file_label(bench_file: BenchFile) -> str:
    if bench_file.results is not None:
        return bench_file.results.machine.label
    return f"{bench_file.llama_bench[0].machine_label} (llama-bench)" if bench_file.llama_bench else "empty file"


def merge_results(results: Sequence[BenchResults], names: Sequence[str] = ()) -> Comparison:
    """merge_files for results already read (`names`: their file names, to keep one machine's runs apart)."""
    return merge_files([BenchFile(names[i] if i < len(names) else "", result) for i, result in enumerate(results)])


def compare_files(paths: Sequence[str | Path]) -> Comparison:
    files = [read_bench_file(path) for path in paths]
    for path, bench_file in zip(paths, files):
        if bench_file.results is None and not bench_file.llama_bench:
            raise WorkbenchError("no test rows in this file", where=str(path),
                                 fix="give a file written by `workbench bench` or `llama-bench -o json`")
    return merge_files(files)


COLUMNS = ("machine", "run", "model", "size MiB", "params M", "backend", "threads", "batch/ubatch", "K/V", "FA",
           "test", "t/s", "W", "J/tok", "peak °C", "peak MiB", "ppl")
NOT_RUN_THERE = "—"  # this run and test has no line from that machine


def comparison_markdown(comparison: Comparison) -> str:
    footnotes: dict[str, list[str]] = {}
    body = [_cells(line, footnotes) for line in comparison.lines]
    text = "Machines:\n" + "".join(f"- {summary}\n" for _, summary in comparison.machines)
    text += "\nSide by side:\n\n" + side_by_side_markdown(comparison)
    text += "\nEvery test:\n\n" + markdown_table(list(COLUMNS), body)
    text += ("\nt/s is llama-bench's avg_ts ± stddev_ts over the repetitions. Our tg test runs after the "
             "prompt, so it is named at that depth (tg128 @ d256).\n")
    if footnotes:
        text += "\n" + footnote_lines(footnotes)
    return text


def side_by_side_markdown(comparison: Comparison) -> str:
    """One line per model, run and test, a t/s column per machine (and a perplexity column per machine
    when any of ours measured it): the machines next to each other, not one above the other."""
    machines = [label for label, _ in comparison.machines]
    cells: dict[tuple[str, str, str], dict[str, TestLine]] = {}
    for line in comparison.lines:
        cells.setdefault((line.test.model_type, line.run, line.test.test), {})[line.machine] = line
    with_ppl = any(line.row is not None and line.row.ppl is not None for line in comparison.lines)
    header = ["model", "run", "test", *(f"{machine} t/s" for machine in machines)]
    header += [f"{machine} ppl" for machine in machines] if with_ppl else []
    body = []
    for (model, run, test), by_machine in cells.items():
        rates = [f"{by_machine[m].test.avg_ts:.2f} ± {by_machine[m].test.stddev_ts:.2f}" if m in by_machine
                 else NOT_RUN_THERE for m in machines]
        ppl = [_ppl_cell(by_machine.get(m)) for m in machines] if with_ppl else []
        body.append([model, run, test, *rates, *ppl])
    return markdown_table(header, body)


def _ppl_cell(line: TestLine | None) -> str:
    if line is None:
        return NOT_RUN_THERE
    if line.row is None:
        return f"{NOT_AVAILABLE} ({NOT_IN_LLAMA_BENCH})"
    return f"{line.row.ppl:.3f}" if line.row.ppl is not None else NOT_AVAILABLE


def _cells(line: TestLine, footnotes: dict[str, list[str]]) -> list[str]:
    test, row = line.test, line.row

    def missing(header: str, reason: str) -> str:
        columns = footnotes.setdefault(reason, [])
        if header not in columns:
            columns.append(header)
        return f"{NOT_AVAILABLE} [{list(footnotes).index(reason) + 1}]"

    def ours(header: str, value: float | None, fmt: str, field: str) -> str:
        if row is None:
            return missing(header, NOT_IN_LLAMA_BENCH)
        if value is None:
            return missing(header, row.why_unavailable(field) or "not measured")
        return format(value, fmt)

    def known(value: object, fmt: str = "") -> str:
        return "?" if value is None or value == "" else format(value, fmt)

    joules = (missing("J/tok", PER_GENERATED_TOKEN) if row is not None and not test.n_gen
              else ours("J/tok", row.joules_per_token if row else None, ".3f", "joules_per_token"))
    return [
        line.machine,
        line.run,
        test.model_type,
        known(test.model_size / MIB if test.model_size is not None else None, ".1f"),
        known(test.model_n_params / 1e6 if test.model_n_params is not None else None, ".1f"),
        test.backends or "?",
        known(test.n_threads),
        f"{known(test.n_batch)}/{known(test.n_ubatch)}",
        f"{test.type_k or '?'}/{test.type_v or '?'}",
        test.flash_attn or "?",
        test.test,
        f"{test.avg_ts:.2f} ± {test.stddev_ts:.2f}",
        ours("W", row.power_w if row else None, ".2f", "power_w"),
        joules,
        ours("peak °C", row.peak_temp_c if row else None, ".1f", "peak_temp_c"),
        ours("peak MiB", row.peak_rss_bytes / MIB if row else None, ".1f", "peak_rss_bytes"),
        ours("ppl", row.ppl if row else None, ".3f", "ppl"),
    ]
