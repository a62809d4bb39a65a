"""Merge bench result files from several machines into one side-by-side table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.core.bench.machine import Machine
from workbench.core.bench.report import (
    MD_COLUMNS,
    BenchResults,
    footnote_lines,
    machine_summary,
    markdown_table,
    md_cells,
    read_results,
)
from workbench.core.bench.rows import BenchRow
from workbench.core.errors import WorkbenchError


@dataclass(frozen=True)
class MergedRow:
    machine: str  # the machine's label, made unique across the merged files
    row: BenchRow


@dataclass(frozen=True)
class Comparison:
    machines: tuple[tuple[str, Machine], ...]  # (unique label, machine) in file order
    rows: tuple[MergedRow, ...]  # grouped by preset, machines in file order within a preset


def merge_results(results: Sequence[BenchResults], names: Sequence[str] = ()) -> Comparison:
    """Rows of every file, the same preset on different machines next to each other.

    Two files from one host (a before/after run) get the file name added to their label so
    they stay apart.
    """
    if len(results) < 2:
        raise WorkbenchError("compare needs at least two result files", fix="give two or more .json files")
    labels: list[str] = []
    for index, result in enumerate(results):
        label = result.machine.label
        if label in labels or any(r.machine.label == label for j, r in enumerate(results) if j != index):
            label = f"{label} [{names[index] if index < len(names) else index + 1}]"
        labels.append(label)
    preset_order: list[str] = []
    for result in results:
        for row in result.rows:
            if row.preset not in preset_order:
                preset_order.append(row.preset)
    merged = [
        MergedRow(machine=label, row=row)
        for preset in preset_order
        for label, result in zip(labels, results)
        for row in result.rows
        if row.preset == preset
    ]
    return Comparison(machines=tuple(zip(labels, (r.machine for r in results))), rows=tuple(merged))


def compare_files(paths: Sequence[str | Path]) -> Comparison:
    return merge_results([read_results(path) for path in paths], [Path(path).name for path in paths])


def comparison_markdown(comparison: Comparison) -> str:
    footnotes: dict[str, list[str]] = {}
    body = [[merged.machine, *md_cells(merged.row, footnotes)] for merged in comparison.rows]
    text = "Machines:\n" + "".join(
        f"- {machine_summary(machine).replace(machine.label, label, 1)}\n" for label, machine in comparison.machines
    )
    text += "\n" + markdown_table(["machine", *(header for header, _, _ in MD_COLUMNS)], body)
    text += "\nΔppl and speedup are within each machine's own sweep.\n"
    if footnotes:
        text += "\n" + footnote_lines(footnotes)
    return text
