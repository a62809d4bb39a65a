"""The bench screen's charts, the report's three in the terminal (plotext), each bar and point with its value:
decode measured beside predicted, perplexity against decode tok/s, and memory stacked against the budget."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual_plotext import PlotextPlot

from workbench.core.bench.report_model import ReportRow, pareto_front
from workbench.core.units import MIB


def _short(name: str, width: int = 12) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


class BenchCharts(Horizontal):
    """Three plots side by side; `show(rows)` redraws them from the report's rows (the same figures as its charts)."""

    DEFAULT_CSS = """
    BenchCharts { height: 1fr; min-height: 10; }
    BenchCharts PlotextPlot { width: 1fr; border: round $primary; }
    """

    def compose(self) -> ComposeResult:
        yield PlotextPlot(id="bench-plot-speed")
        yield PlotextPlot(id="bench-plot-quality")
        yield PlotextPlot(id="bench-plot-memory")

    def show(self, rows: Sequence[ReportRow], budget_known: bool) -> None:
        self._speed(rows)
        self._quality(rows)
        self._memory(rows, budget_known)

    def _speed(self, rows: Sequence[ReportRow]) -> None:
        plot = self.query_one("#bench-plot-speed", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.title("decode tok/s: measured | predicted")
        if rows:
            names = [_short(row.preset) for row in rows]
            measured = [row.decode.measured for row in rows]
            predicted = [row.decode.predicted or 0.0 for row in rows]
            narrow = plot.content_region.width < 44  # a third of 120 columns or less: no legend, the measured value alone
            plt.multiple_bar(names, [measured, predicted], labels=None if narrow else ["measured", "predicted"],
                             width=0.8)
            top = max(measured + predicted)
            for index, row in enumerate(rows, start=1):
                value = f"{row.decode.measured:.1f}" + ("" if narrow else "|" + (
                    f"{row.decode.predicted:.1f}" if row.decode.predicted else "n/a"))
                plt.text(value, index, max(row.decode.measured, row.decode.predicted or 0.0) + top * 0.06,
                         alignment="center")
            plt.ylim(0, top * 1.25)
        plot.refresh()

    def _quality(self, rows: Sequence[ReportRow]) -> None:
        plot = self.query_one("#bench-plot-quality", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.title("ppl vs decode tok/s, front -")
        scored = [row for row in rows if row.ppl is not None]
        if scored:
            plt.scatter([row.decode.measured for row in scored], [row.ppl for row in scored], marker="o")
            front = pareto_front(tuple(scored))
            plt.plot([row.decode.measured for row in front], [row.ppl for row in front])
            middle = (min(row.decode.measured for row in scored) + max(row.decode.measured for row in scored)) / 2
            for row in scored:  # three decimals: never mistaken for an axis tick; kept inside the plot's edges
                plt.text(f"{_short(row.preset, 10)} {row.ppl:.3f}", row.decode.measured, row.ppl,
                         alignment="right" if row.decode.measured > middle else "left")
        plot.refresh()

    def _memory(self, rows: Sequence[ReportRow], budget_known: bool) -> None:
        plot = self.query_one("#bench-plot-memory", PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        if rows and budget_known:
            budget = rows[0].memory.budget_bytes / MIB
            plt.title(f"peak MiB of the {budget:,.0f} budget")
        else:
            plt.title("peak MiB (the budget when the sweep ends)")
        if rows:
            names = [_short(row.preset) for row in rows]
            parts = [[row.memory.weights_bytes / MIB for row in rows], [(row.memory.kv_bytes or 0) / MIB for row in rows],
                     [row.memory.rest_bytes / MIB for row in rows]]
            plt.stacked_bar(names, parts, labels=None if plot.content_region.width < 44 else ["weights", "KV", "rest"],
                            width=0.8)
            totals = [sum(values) for values in zip(*parts)]
            top = max(totals + ([rows[0].memory.budget_bytes / MIB] if budget_known else []))
            for index, (row, total) in enumerate(zip(rows, totals), start=1):
                verdict = f" {row.memory.verdict}" if budget_known else ""
                plt.text(f"{row.memory.peak_bytes / MIB:,.0f}{verdict}", index, total + top * 0.06, alignment="center")
            if budget_known:
                plt.hline(rows[0].memory.budget_bytes / MIB, "red")
            plt.ylim(0, top * 1.25)
        plot.refresh()
