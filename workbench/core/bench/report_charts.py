"""The report's charts drawn by matplotlib (Agg, no display) as SVG documents, in the projector-light theme's
colours: measured beside predicted speed, speed against perplexity with the Pareto front, memory against budgets."""

from __future__ import annotations

import io
import tomllib

import matplotlib

matplotlib.use("Agg")  # before pyplot: draw to files, never to a display

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from workbench.core.bench.report_model import Chart, Report, ReportRow, pareto_front  # noqa: E402
from workbench.core.paths import data_dir  # noqa: E402
from workbench.core.units import MIB  # noqa: E402

THEME = "projector-light"  # paper is white: the theme made for white backgrounds
FALLBACK = {"chart-decode": "#0047ab", "chart-bound": "#b00020", "ledger-weights": "#0047ab", "ledger-kv": "#6a1b9a",
            "ledger-compute": "#a64b00", "ledger-headroom": "#2e7d32", "ledger-over": "#b00020",
            "foreground": "#000000", "secondary": "#3c3c3c", "warning": "#8a5a00", "success": "#006b2d"}
DEVICE_MARKERS = "osD^v<>PX*"
STYLE = {
    "svg.fonttype": "none",  # text stays text in the SVG: searchable and sharp
    "text.parse_math": False,  # a preset name with '$' is a name, not TeX to parse
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def theme_colours(theme: str = THEME) -> dict[str, str]:
    """The theme's colours (top-level and [variables]); the shipped values when the file cannot be read."""
    try:
        data = tomllib.loads((data_dir("themes") / f"{theme}.toml").read_text(encoding="utf-8"))
    except (OSError, FileNotFoundError, tomllib.TOMLDecodeError):
        return dict(FALLBACK)
    found = {key: value for key, value in {**data, **data.get("variables", {})}.items() if isinstance(value, str)}
    return {key: found.get(key, value) for key, value in FALLBACK.items()}


def _svg(figure: Figure) -> str:
    out = io.StringIO()
    figure.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})  # no date: same input, same file
    plt.close(figure)
    return out.getvalue()


def _label(row: ReportRow, devices: int) -> str:
    return f"{row.preset} · {row.device}" if devices > 1 else row.preset


def speed_chart(report: Report, colours: dict[str, str]) -> Chart:
    """Decode and prefill per device and preset: the measured bar (± its stddev) and the predicted one beside it."""
    rows = report.rows
    labels = [_label(row, len(report.devices)) for row in rows]
    height = 1.2 + 0.42 * len(rows)
    with plt.rc_context(STYLE):
        figure, axes = plt.subplots(1, 2, figsize=(10, height), sharey=True)
        for axis, name in zip(axes, ("decode", "prefill")):
            rates = [getattr(row, name) for row in rows]
            positions = range(len(rows))
            measured = [rate.measured for rate in rates]
            axis.barh([p + 0.2 for p in positions], measured, height=0.38, xerr=[rate.stddev for rate in rates],
                      color=colours["chart-decode"], label="measured", error_kw={"elinewidth": 0.8})
            predicted = [rate.predicted or 0.0 for rate in rates]
            axis.barh([p - 0.2 for p in positions], predicted, height=0.38, fill=False, hatch="///",
                      edgecolor=colours["chart-bound"], label="predicted")
            top = max(measured + predicted + [1.0])
            for position, rate in zip(positions, rates):
                axis.text(rate.measured + top * 0.01, position + 0.2, f"{rate.measured:.1f}", va="center", fontsize=8)
                text = f"{rate.predicted:.1f}" if rate.predicted is not None else "no prediction"
                axis.text((rate.predicted or 0.0) + top * 0.01, position - 0.2, text, va="center", fontsize=8,
                          color=colours["chart-bound"])
            axis.set_xlim(0, top * 1.25)
            axis.set_title(f"{name} tok/s")
            axis.set_yticks(list(positions), labels)
            axis.invert_yaxis()
        axes[0].legend(loc="lower right", fontsize=8)
        figure.tight_layout()
        return Chart("speed", "Decode and prefill: measured and predicted", _svg(figure))


def quality_chart(report: Report, colours: dict[str, str]) -> Chart | None:
    """Perplexity against decode tok/s per device, the Pareto front (faster or better, never both worse) joined."""
    if not any(row.ppl is not None for row in report.rows):
        return None
    palette = [colours["chart-decode"], colours["ledger-compute"], colours["ledger-kv"], colours["success"],
               colours["chart-bound"], colours["secondary"]]
    with plt.rc_context(STYLE):
        figure, axis = plt.subplots(figsize=(7, 4.2))
        for index, device in enumerate(report.devices):
            colour, marker = palette[index % len(palette)], DEVICE_MARKERS[index % len(DEVICE_MARKERS)]
            scored = [row for row in device.rows if row.ppl is not None]
            axis.scatter([row.decode.measured for row in scored], [row.ppl for row in scored], color=colour,
                         marker=marker, label=device.label, zorder=3)
            for row in scored:
                axis.annotate(f"{row.preset} ({row.decode.measured:.1f}, {row.ppl:.2f})",
                              (row.decode.measured, row.ppl), textcoords="offset points", xytext=(5, 4), fontsize=7)
            front = pareto_front(device.rows)
            axis.plot([row.decode.measured for row in front], [row.ppl for row in front], color=colour,
                      linestyle="--", linewidth=1, label=f"Pareto front, {device.label}")
        axis.set_xlabel("decode tok/s (measured)")
        axis.set_ylabel("perplexity (lower is better)")
        axis.legend(fontsize=7)
        figure.tight_layout()
        return Chart("quality", "Speed against quality, the Pareto front dashed", _svg(figure))


def memory_chart(report: Report, colours: dict[str, str]) -> Chart:
    """Weights, KV and the rest of the measured peak stacked per preset, against its device's budget (a panel per
    device: a 4 GB board and a 16 GB PC on one axis would hide the small one)."""
    with plt.rc_context(STYLE):
        heights = [len(device.rows) + 1.5 for device in report.devices]
        figure, axes = plt.subplots(len(report.devices), 1, figsize=(10, 0.45 * sum(heights) + 0.6), squeeze=False,
                                    gridspec_kw={"height_ratios": heights})
        for axis, device in zip(axes[:, 0], report.devices):
            rows = device.rows
            positions = list(range(len(rows)))
            weights = [row.memory.weights_bytes / MIB for row in rows]
            kv = [(row.memory.kv_bytes or 0) / MIB for row in rows]
            rest = [row.memory.rest_bytes / MIB for row in rows]
            axis.barh(positions, weights, color=colours["ledger-weights"], label="weights")
            axis.barh(positions, kv, left=weights, color=colours["ledger-kv"], label="KV cache")
            axis.barh(positions, rest, left=[w + k for w, k in zip(weights, kv)], color=colours["ledger-compute"],
                      label="compute and the rest of the peak")
            budget = rows[0].memory.budget_bytes / MIB
            axis.axvline(budget, color=colours["chart-bound"], linewidth=2, label=f"budget {budget:,.0f} MiB")
            stacked = [w + k + r for w, k, r in zip(weights, kv, rest)]
            top = max(stacked + [budget])
            for position, row, length in zip(positions, rows, stacked):
                axis.text(length + top * 0.01, position, f"peak {row.memory.peak_bytes / MIB:,.0f} MiB: "
                          f"{row.memory.verdict}", va="center", fontsize=8)
            axis.set_xlim(0, top * 1.35)
            axis.set_title(device.label, fontsize=9, loc="left")
            axis.set_yticks(positions, [row.preset for row in rows])
            axis.invert_yaxis()
            axis.legend(fontsize=7, loc="lower right")
        axes[-1, 0].set_xlabel("MiB")
        figure.tight_layout()
        return Chart("memory", "Memory: the measured peak against each device's budget", _svg(figure))


def report_charts(report: Report) -> tuple[Chart, ...]:
    colours = theme_colours()
    charts = [speed_chart(report, colours), quality_chart(report, colours), memory_chart(report, colours)]
    return tuple(chart for chart in charts if chart is not None)
