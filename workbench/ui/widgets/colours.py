"""The theme's app colours (ledger categories, KV block states) for widgets that draw with Rich."""

from __future__ import annotations

from rich.text import Text
from textual.app import App

from workbench.ui.themes import APP_COLOUR_DEFAULTS


def theme_colour(app: App, name: str) -> str:
    """The current theme's value for an app colour variable such as `ledger-weights`."""
    return app.theme_variables.get(name) or APP_COLOUR_DEFAULTS[name]


SPARK_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float] | tuple[float, ...], width: int) -> str:
    """The last `width` values as block characters scaled between their min and max."""
    tail = list(values)[-width:]
    if not tail:
        return ""
    low, high = min(tail), max(tail)
    span = high - low
    if span <= 0:
        return SPARK_BARS[len(SPARK_BARS) // 2 - 1] * len(tail)
    return "".join(SPARK_BARS[min(len(SPARK_BARS) - 1, int((v - low) / span * len(SPARK_BARS)))] for v in tail)


def legend(items: list[tuple[str, str]], width: int) -> "Text":
    """Swatch-and-label pairs ("■ weights") laid out in lines of `width` cells, never split inside a pair.

    Rich wraps at any whitespace, a no-break space included (it is whitespace to Python's regex), so the
    lines are broken here, between pairs.
    """
    text = Text()
    used = 0
    for colour, label in items:
        cells = 2 + len(label)
        if used and used + 2 + cells > width:
            text.append("\n")
            used = 0
        elif used:
            text.append("  ")
            used += 2
        text.append("■ ", style=colour)
        text.append(label)
        used += cells
    return text
