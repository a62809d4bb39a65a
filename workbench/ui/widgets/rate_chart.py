"""The decode-rate chart as text: bars in eighths of a row on an even, round y scale, readable in five rows.

Each column is a slice of time since the answer's first token; the latest answer is drawn as bars
(the rate in that slice: the last point in it, held until the next point), earlier answers as dots.
A tick's label stands on the row whose top edge is that value, and the ticks split the rows evenly,
so a bar reaches a tick's row exactly when its value is the tick's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

EIGHTHS = " ▁▂▃▄▅▆▇█"
NICE_STEPS = (1.0, 2.0, 2.5, 5.0)
BOUND_SHOWN_UP_TO = 3.0  # the bound joins the scale while it is within 3x the measured peak, else it is named


@dataclass(frozen=True)
class ChartColours:
    latest: str
    earlier: str
    bound: str
    text: str


def nice_step(at_least: float) -> float:
    """The smallest 1, 2, 2.5 or 5 x 10^k that is >= `at_least` (> 0)."""
    power = 10.0 ** math.floor(math.log10(at_least))
    for step in NICE_STEPS:
        if step * power >= at_least * (1 - 1e-9):
            return step * power
    return 10.0 * power


def tick_count(rows: int) -> int:
    """How many tick intervals split `rows` rows evenly: a divisor of rows, about one label every 2-3 rows."""
    for count in range(min(6, rows), 0, -1):
        if rows % count == 0 and rows // count >= (2 if rows >= 6 else 1):
            return count
    return 1


def tick_text(value: float, step: float) -> str:
    """A tick's label with the decimals its step needs (2.5, 5.0, 7.5 -> one; 10, 20 -> none)."""
    decimals = 0 if step == int(step) else max(1, -math.floor(math.log10(step - int(step))))
    return f"{value:,.{decimals}f}"


def column_values(points: list[tuple[float, float]], columns: int, x_max: float) -> list[float | None]:
    """The rate in each column's slice of time: the last point at or before its end (None before the first)."""
    values: list[float | None] = []
    index, current = 0, None
    for column in range(columns):
        end = (column + 1) * x_max / columns
        while index < len(points) and points[index][0] <= end + 1e-12:
            current = points[index][1]
            index += 1
        values.append(current)
    return values


def chart_title(shown: str, predicted: float, board: str, bound: float, bound_in_scale: bool, width: int) -> str:
    """The most of "decode tok/s, <shown> — predicted <rate> on <board>, bound <rate> (above the chart)" that
    fits `width`: the answers shown go first, then the board's name, then where the bound is; the numbers stay."""
    rate_only = f"predicted {predicted:,.0f}" if predicted > 0 else ""
    with_board = rate_only + (f" on {board}" if board and rate_only else "")
    bound_only = f"bound {bound:,.0f}" if bound > 0 else ""
    with_where = bound_only + (" (above the chart)" if bound_only and not bound_in_scale else "")
    titles = []
    for head, prediction, limit in ((f"decode tok/s, {shown}", with_board, with_where),
                                    ("decode tok/s", with_board, with_where), ("decode tok/s", rate_only, with_where),
                                    ("decode tok/s", rate_only, bound_only)):
        marks = ", ".join(filter(None, (prediction, limit)))
        titles.append(head + (f" — {marks}" if marks else ""))
    return next((title for title in titles if len(title) <= width), titles[-1][:width])


def draw_rate_chart(series: list[list[tuple[float, float]]], bound: float, width: int, height: int,
                    colours: ChartColours, predicted: float = 0.0, board: str = "") -> Text:
    """`series`: per answer, (seconds since its first token, tok/s); the last is the latest. Fills width x height.
    The title carries the predicted rate (`board`'s, where one is simulated): the panel's lines below the chart
    may have no room."""
    drawn = [points for points in series if points]
    peak = max((rate for points in drawn for _, rate in points), default=0.0)
    bound_in_scale = bound > 0 and (peak == 0 or bound <= BOUND_SHOWN_UP_TO * peak)
    high = max(peak, bound if bound_in_scale else 0.0) or 10.0
    shown = f"last {len(series)} answers" if len(series) > 1 else "this answer"
    title = chart_title(shown, predicted, board, bound, bound_in_scale, width)
    with_title = height >= 5
    room = max(1, height - 1 - (1 if with_title else 0))  # the last line is the time axis
    # rows that split into few even steps (13 rows: one; 14: two) leave a row or two blank above the scale
    # for more ticks (12 rows: six)
    rows = max((rows for rows in (room, room - 1, room - 2) if rows >= 1), key=lambda rows: (tick_count(rows), rows))
    intervals = tick_count(rows)
    step = nice_step(high / intervals)
    top = step * intervals
    label_width = max(len(tick_text(step * i, step)) for i in range(intervals + 1))
    columns = max(1, width - label_width - 1)
    x_max = max((points[-1][0] for points in drawn), default=1.0) or 1.0
    latest = column_values(series[-1], columns, x_max) if series and series[-1] else [None] * columns
    earlier = [column_values(points, columns, x_max) for points in series[:-1] if points]
    text_style, bound_style = Style(color=colours.text), Style(color=colours.bound)
    latest_style, earlier_style = Style(color=colours.latest), Style(color=colours.earlier)
    bound_row = rows - 1 - min(rows - 1, int(bound / top * rows)) if bound_in_scale else -1
    out = Text(no_wrap=True, overflow="crop")
    if with_title:
        out.append(title.ljust(width) + "\n", style=text_style)
    for _ in range(room - rows):
        out.append(" " * label_width + "│" + " " * columns + "\n", style=text_style)
    for row in range(rows):
        edge = rows - row  # this row spans (edge - 1, edge] in rows from the bottom
        tick = (rows - row) * intervals / rows
        label = tick_text(round(tick) * step, step) if abs(tick - round(tick)) < 1e-9 else ""
        out.append(label.rjust(label_width) + ("┤" if label else "│"), style=text_style)
        for column in range(columns):
            value = latest[column]
            eighths = round(value / top * rows * 8) if value is not None else 0
            filled = min(8, max(0, eighths - (edge - 1) * 8))
            if filled:
                out.append(EIGHTHS[filled], style=latest_style)
            elif any(values[column] is not None and edge - 1 <= values[column] / top * rows < edge
                     for values in earlier):
                out.append("·", style=earlier_style)
            elif row == bound_row:
                out.append("╌", style=bound_style)
            else:
                out.append(" ")
        out.append("\n")
    axis = f" 0 s{'─' * max(0, columns - 4 - len(f'{x_max:.1f} s'))}{x_max:.1f} s "
    out.append("0".rjust(label_width) + "└" + axis[:columns], style=text_style)
    return out
