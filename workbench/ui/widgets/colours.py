"""The theme's app colours (ledger categories, KV block states) for widgets that draw with Rich."""

from __future__ import annotations

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
