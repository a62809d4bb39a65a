"""The report as one self-contained HTML file: every text escaped, charts as data: images, no script and no
network (its Content-Security-Policy forbids both), laid out to print as a PDF."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable

from workbench.core.bench.report_model import NOT_MEASURED, Chart, Rate, Report, ReportRow, pareto_front
from workbench.core.bench.rows import NOISE_RULE
from workbench.core.ledger.types import DOES_NOT_FIT, FITS
from workbench.core.units import MIB

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
STYLE = """
body { font-family: "DejaVu Sans", Arial, sans-serif; color: #000; background: #fff; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; font-size: 14px; }
h1 { color: #0047ab; } h2 { color: #0047ab; border-bottom: 2px solid #e0e0e0; margin-top: 2em; }
.answer { font-size: 1.25em; line-height: 1.5; } .answer li { margin: .4em 0; }
.simulated { border-left: 4px solid #8a5a00; background: #fff8e6; padding: .5em 1em; }
table { border-collapse: collapse; margin: 1em 0; } th, td { border: 1px solid #c8c8c8; padding: .25em .6em; }
th { background: #f2f2f2; text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { padding: .1em .5em; border-radius: .6em; color: #fff; font-weight: bold; white-space: nowrap; }
.fits { background: #006b2d; } .tight { background: #8a5a00; } .does-not-fit { background: #b00020; }
.na { color: #555; font-style: italic; } .noise { color: #8a5a00; }
ol.notes { color: #3c3c3c; font-size: 12px; margin-top: -.5em; }
img.chart { max-width: 100%; display: block; margin: 1em 0; }
pre { background: #f2f2f2; padding: .6em; white-space: pre-wrap; word-break: break-all; font-size: 12px; }
@media print { h2.page { page-break-before: always; } body { margin: 0; } }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _cell(text: str, css: str = "num", title: str = "") -> str:
    tip = f' title="{_e(title)}"' if title else ""
    return f'<td class="{css}"{tip}>{_e(text)}</td>'


class Notes:
    """A table's reasons for its unavailable cells: the cell says 'n/a [k]', note k under the table says why."""

    def __init__(self, shown: str = "n/a") -> None:
        self.reasons: dict[str, int] = {}
        self.shown = shown  # what an unavailable cell says before its note's number

    def missing(self, why: str) -> str:
        number = self.reasons.setdefault(why, len(self.reasons) + 1)
        shown = NOT_MEASURED if why == NOT_MEASURED else self.shown
        return f'<td class="na" title="{_e(why)}">{shown} [{number}]</td>'

    def html(self) -> str:
        items = "".join(f'<li value="{number}">{_e(why)}</li>' for why, number in self.reasons.items())
        return f'<ol class="notes">{items}</ol>' if items else ""


def _number(value: float | None, fmt: str, why: str, notes: Notes, css: str = "num") -> str:
    return _cell(format(value, fmt), css) if value is not None else notes.missing(why)


def _rate_cells(rate: Rate, name: str, notes: Notes) -> str:
    ratio = _cell(f"{rate.measured / rate.predicted:.2f}", f"num {name}-ratio") if rate.predicted else notes.missing(
        rate.why_no_prediction)
    return (_cell(f"{rate.measured:.2f} ± {rate.stddev:.2f}", f"num {name}")
            + _number(rate.predicted, ".2f", rate.why_no_prediction, notes, f"num {name}-predicted") + ratio)


def _table(header: Iterable[str], body: Iterable[str], css: str, notes: Notes) -> str:
    head = "".join(f"<th>{_e(name)}</th>" for name in header)
    return (f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
            + notes.html())


def _row_open(index: int, row: ReportRow) -> str:
    return (f'<tr data-row="{index}" data-device="{_e(row.device)}" data-preset="{_e(row.preset)}">'
            + _cell(row.device, "device") + _cell(row.preset, "preset"))


def _speed_table(report: Report, noisy: dict[tuple[str, str], str]) -> str:
    body, notes = [], Notes()
    for index, row in enumerate(report.rows):
        near = noisy.get((row.device, row.preset), "")
        noise = f'<td class="noise">within the noise of {_e(near)}</td>' if near else "<td></td>"
        body.append(_row_open(index, row) + _cell(row.test, "test") + _rate_cells(row.decode, "decode", notes)
                    + _rate_cells(row.prefill, "prefill", notes) + noise + "</tr>")
    return _table(("device", "preset", "test", "decode tok/s", "decode predicted", "measured / predicted",
                   "prefill tok/s", "prefill predicted", "measured / predicted", "noise"), body, "speed", notes)


def _quality_table(report: Report) -> str:
    body, notes = [], Notes()
    for device in report.devices:
        front = {row.preset for row in pareto_front(device.rows)}
        for row in device.rows:
            index = report.rows.index(row)
            body.append(_row_open(index, row) + _cell(f"{row.decode.measured:.2f}", "num decode")
                        + _number(row.ppl, ".3f", row.why("ppl"), notes, "num ppl")
                        + _number(row.ppl_delta, "+.3f", row.why("ppl_delta"), notes, "num ppl-delta")
                        + _cell("on the front" if row.preset in front else "", "front") + "</tr>")
    return _table(("device", "preset", "decode tok/s", "perplexity", "Δ perplexity", "Pareto front"), body, "quality",
                  notes)


def _badge(verdict: str) -> str:
    css = {FITS: "fits", DOES_NOT_FIT: "does-not-fit"}.get(verdict, "tight")
    return f'<td><span class="badge {css}">{_e(verdict)}</span></td>'


def _mib(value: int | None, why: str, notes: Notes, css: str) -> str:
    return _cell(f"{value / MIB:,.1f}", css) if value is not None else notes.missing(why)


def _memory_table(report: Report) -> str:
    body, notes = [], Notes()
    for index, row in enumerate(report.rows):
        memory = row.memory
        body.append(_row_open(index, row) + _mib(memory.weights_bytes, "", notes, "num weights")
                    + _mib(memory.kv_bytes, row.why("kv_bytes"), notes, "num kv")
                    + _mib(memory.rest_bytes, "", notes, "num rest") + _mib(memory.peak_bytes, "", notes, "num peak")
                    + _mib(memory.predicted_bytes, row.why("predicted_bytes"), notes, "num predicted")
                    + _mib(memory.budget_bytes, "", notes, "num budget") + _badge(memory.verdict) + "</tr>")
    return _table(("device", "preset", "weights MiB", "KV MiB", "rest MiB", "peak MiB", "predicted MiB",
                   "budget MiB", "verdict"), body, "memory", notes)


def _energy_table(report: Report) -> str:
    body, notes = [], Notes(NOT_MEASURED)
    for index, row in enumerate(report.rows):
        throttled = {True: "yes", False: "no"}.get(row.throttled)  # type: ignore[arg-type]
        body.append(_row_open(index, row)
                    + _number(row.joules_per_token, ".3f", row.why("joules_per_token"), notes, "num joules")
                    + _number(row.peak_temp_c, ".1f", row.why("peak_temp_c"), notes, "num temp")
                    + (_cell(throttled, "throttled") if throttled else notes.missing(row.why("throttled"))) + "</tr>")
    simulated = [device.label for device in report.devices if device.simulated]
    whose = (f"<p>Rows of {_e(', '.join(simulated))}: energy and temperature are the machine's the bench ran on, "
             "not the board's.</p>" if simulated else "")
    return whose + _table(("device", "preset", "J per generated token", "peak °C", "throttled"), body, "energy", notes)


def _chart(chart: Chart) -> str:
    data = base64.b64encode(chart.svg.encode("utf-8")).decode("ascii")
    return (f'<figure><img class="chart" data-chart="{_e(chart.name)}" alt="{_e(chart.title)}" '
            f'src="data:image/svg+xml;base64,{data}"><figcaption>{_e(chart.title)}</figcaption></figure>')


def _appendix(report: Report) -> str:
    parts = [f"<p>Workbench version <b>{_e(report.workbench_version)}</b>.</p>"]
    for device in report.devices:
        machine = device.machine
        parts.append(f"<h3>{_e(device.label)}</h3><p>{_e(device.summary)}</p>"
                     f"<p>Device profile <b>{_e(device.profile)}</b>"
                     f"{' (' + _e(machine.device_description) + ')' if machine.device_description else ''}: "
                     f"{machine.device_ram_total_mb:,} MB RAM, "
                     f"{machine.device_budget_mb:,} MB budget. llama.cpp build: {_e(device.llama_cpp_build)}; its system "
                     f"info:</p><pre>{_e(machine.llama_cpp_system_info)}</pre>")
    for name, toml in report.presets:
        parts.append(f'<h3>Preset {_e(name)}</h3><pre class="preset-toml">{_e(toml)}</pre>')
    return "".join(parts)


def _simulated(report: Report) -> str:
    notes = [f'<p class="simulated">{_e(device.profile)} is a board simulated on {_e(device.machine.hostname)}: '
             "its memory verdict is the board's (its budget), but every rate measured here is "
             f"{_e(device.machine.hostname)}'s; the board's own rate is the predicted column.</p>"
             for device in report.devices if device.simulated]
    return "".join(notes)


def render_html(report: Report, charts: tuple[Chart, ...], title: str = "Edge LLM Workbench report") -> str:
    noisy: dict[tuple[str, str], str] = {}
    for device, a, b in report.noise:
        noisy.setdefault((device, a), b)
        noisy.setdefault((device, b), a)
    by_name = {chart.name: _chart(chart) for chart in charts}
    answers = "".join(f"<li>{_e(sentence)}</li>" for sentence in report.answers)
    noise = "".join(f"<li>On {_e(device)}, {_e(a)} and {_e(b)} decode {_e(NOISE_RULE)}: do not pick one over the "
                    "other for speed.</li>" for device, a, b in report.noise) or (
        "<li>No two neighbouring decode rates are within the noise (twice the standard error of their difference; "
        "a preset of one timed run has no spread to judge by).</li>")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>"
        f'<h1>{_e(title)}</h1><section id="answer"><h2>The answer</h2><ul class="answer">{answers}</ul>'
        f"{_simulated(report)}</section>"
        f'<section id="speed"><h2 class="page">Speed per device and preset</h2>{by_name.get("speed", "")}'
        f'{_speed_table(report, noisy)}<ul class="noise-notes">{noise}</ul></section>'
        f'<section id="quality"><h2 class="page">Speed against quality</h2>'
        f'{by_name.get("quality", "<p class=na>Perplexity was not measured: no quality chart.</p>")}'
        f"{_quality_table(report)}</section>"
        f'<section id="memory"><h2 class="page">Memory against each budget</h2>{by_name.get("memory", "")}'
        f"{_memory_table(report)}</section>"
        f'<section id="energy"><h2>Energy and heat</h2>{_energy_table(report)}</section>'
        f'<section id="appendix"><h2 class="page">Appendix: how to reproduce it</h2>{_appendix(report)}</section>'
        "</body></html>\n"
    )
