"""Accuracy against seconds and against joules per question, one series per preset, a point per N."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static
from textual_plotext import PlotextPlot

from workbench.core.tasks.results import TaskRow


def series(rows: Sequence[TaskRow], cost: str) -> dict[str, tuple[list[float], list[float], list[int]]]:
    """preset (and clock) -> (costs, accuracies, Ns), by N; rows without the cost are left out."""
    grouped: dict[str, tuple[list[float], list[float], list[int]]] = {}
    for row in sorted(rows, key=lambda r: r.samples):
        value = getattr(row, cost)
        if value is None:
            continue
        clock = "" if row.cpu_max_khz is None else f" @{row.cpu_max_khz / 1000:.0f}MHz"
        xs, ys, ns = grouped.setdefault(f"{row.preset} t{row.n_threads}{clock}", ([], [], []))
        xs.append(value)
        ys.append(row.accuracy)
        ns.append(row.samples)
    return grouped


class TrianglePlot(Horizontal):
    """Two plots side by side; `show(rows)` redraws them. Energy without a power source says why."""

    DEFAULT_CSS = """
    TrianglePlot { height: 1fr; min-height: 10; }
    TrianglePlot PlotextPlot { width: 1fr; border: round $primary; }
    TrianglePlot #triangle-energy-missing { width: 1fr; border: round $primary; color: $text-muted; padding: 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.rows: tuple[TaskRow, ...] = ()

    def compose(self) -> ComposeResult:
        yield PlotextPlot(id="triangle-latency")
        yield PlotextPlot(id="triangle-energy")
        yield Static("", id="triangle-energy-missing")

    def on_mount(self) -> None:
        self.show(self.rows)

    def show(self, rows: Sequence[TaskRow]) -> None:
        self.rows = tuple(rows)
        self._draw("#triangle-latency", "accuracy vs seconds/question (label: N)", "seconds_per_question", "s")
        energy = series(self.rows, "joules_per_question")
        missing = self.query_one("#triangle-energy-missing", Static)
        plot = self.query_one("#triangle-energy", PlotextPlot)
        if self.rows and not energy:
            why = next((r.why_unavailable("joules_per_question") for r in self.rows
                        if r.why_unavailable("joules_per_question")), "no power source")
            missing.update(f"accuracy vs joules/question: unavailable here ({why})")
            missing.display, plot.display = True, False
            return
        missing.display, plot.display = False, True
        self._draw("#triangle-energy", "accuracy vs joules/question (label: N)", "joules_per_question", "J")

    def _draw(self, selector: str, title: str, cost: str, unit: str) -> None:
        plot = self.query_one(selector, PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(title)
        plt.xlabel(unit)
        plt.ylim(0, 1)
        for name, (xs, ys, ns) in series(self.rows, cost).items():
            plt.plot(xs, ys, marker="dot", label=name)
            for x, y, n in zip(xs, ys, ns):
                plt.text(f"N={n}", x, y)
        plot.refresh()
