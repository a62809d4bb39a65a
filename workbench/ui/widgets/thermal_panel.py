"""Temperature panel: temperatures with sparklines, clocks, throttling, power and energy per token."""

from __future__ import annotations

from collections import defaultdict, deque

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from workbench.core.tasks.battery import battery_line
from workbench.core.telemetry.sample import TelemetrySample
from workbench.core.units import celsius, mhz
from workbench.ui.panel_views import ThermalView
from workbench.ui.widgets.colours import sparkline, theme_colour

HISTORY = 60  # samples kept per series: 30 s at the sampler's 2 Hz


def unavailable_reason(sample: TelemetrySample, what: str, default: str) -> str:
    for entry in sample.unavailable:
        if entry.what == what:
            return entry.why
    return default


class ThermalPanel(Widget):
    """Attributes down: the panel grid sets `view`, one frozen ThermalView, at each telemetry tick and turn."""

    BORDER_TITLE = "Temperature & power"

    view: reactive[ThermalView] = reactive(ThermalView())

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        # the sparklines' series: what the panel has drawn, kept across views
        self.history: dict[str, deque[float]] = defaultdict(lambda: deque(maxlen=HISTORY))

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh())

    def watch_view(self, old: ThermalView, new: ThermalView) -> None:
        sample = new.sample
        if sample is None or sample == old.sample:  # a turn's energy alone adds no point
            return
        for temperature in sample.temperatures:
            self.history[f"temp:{temperature.name}"].append(temperature.celsius)
        if sample.total_power_w is not None:
            self.history["power"].append(sample.total_power_w)

    def render(self) -> RenderableType:
        sample = self.view.sample
        if sample is None:
            return Text("Waiting for the first telemetry sample…", style="italic")
        width = self.content_region.width or 40
        spark_width = max(8, width - 26)
        return Group(self._temperatures(sample, spark_width), self._clocks(sample), self._throttle(sample),
                     self._power(sample, spark_width))

    def _temperatures(self, sample: TelemetrySample, spark_width: int) -> RenderableType:
        if not sample.temperatures:
            return Text(unavailable_reason(sample, "temperature", "no thermal sensors exposed on this machine"),
                        style="bold")
        table = Table.grid(padding=(0, 1))
        table.add_column(no_wrap=True)
        table.add_column(justify="right", no_wrap=True)
        table.add_column(no_wrap=True)
        for temperature in sample.temperatures:
            hot = temperature.trip_passive_c or temperature.trip_critical_c
            style = "bold" if hot is None or temperature.celsius < hot - 10 else f"bold {theme_colour(self.app, 'ledger-over')}"
            table.add_row(temperature.name, Text(celsius(temperature.celsius), style=style),
                          Text(sparkline(self.history[f"temp:{temperature.name}"], spark_width),
                               style=theme_colour(self.app, "chart-decode")))
        return table

    def _clocks(self, sample: TelemetrySample) -> RenderableType:
        if not sample.clocks:
            return Text(f"clocks: {unavailable_reason(sample, 'clocks', 'no cpufreq policies exposed')}", style="dim")
        text = Text()
        for clock in sample.clocks:
            if text:
                text.append("\n")
            text.append(f"cpu {clock.cpus}: {mhz(clock.cur_khz)} / {mhz(clock.max_khz)} {clock.governor}")
            if clock.capped:
                text.append(f"  capped below {mhz(clock.hw_max_khz)}", style=f"bold {theme_colour(self.app, 'ledger-compute')}")
        return text

    def _throttle(self, sample: TelemetrySample) -> Text:
        if sample.throttle is None:
            return Text(f"throttle: {unavailable_reason(sample, 'throttle', 'no throttle source exposed')}", style="dim")
        if sample.throttle.active:
            return Text(f"⚠ throttling: {sample.throttle.cause}", style=f"bold {theme_colour(self.app, 'ledger-over')}")
        return Text("throttle: none")

    def _power(self, sample: TelemetrySample, spark_width: int) -> Text:
        if sample.total_power_w is None:
            return Text(f"power: {unavailable_reason(sample, 'power', 'no power source exposed')}", style="dim")
        text = Text(f"power {sample.total_power_w:,.1f} W ")
        text.append(sparkline(self.history["power"], spark_width), style=theme_colour(self.app, "chart-decode"))
        view = self.view
        if view.joules_per_token is not None:
            text.append(f"\nlast turn {view.joules_per_token:,.2f} J/token")
        elif view.energy_note:
            text.append(f"\nJ/token: {view.energy_note}", style="dim")
        elif sample.energy_j is None:
            text.append(f"\nJ/token: {unavailable_reason(sample, 'energy', 'no energy counter')}", style="dim")
        else:
            text.append("\nJ/token: after the first turn", style="dim")
        if view.battery_wh is not None:
            per_answer = (view.joules_per_token * view.last_turn_tokens
                          if view.joules_per_token is not None and view.last_turn_tokens else None)
            text.append("\n" + battery_line(view.battery_wh, sample.total_power_w, per_answer))
        return text
