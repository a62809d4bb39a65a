"""The main screen's telemetry: a thread worker samples; the ledger and temperature panels show it."""

from __future__ import annotations

from textual import work
from textual.worker import get_current_worker

from workbench.ui import engine_work
from workbench.ui.messages import TelemetryFailed, TelemetrySampled
from workbench.ui.widgets.ledger_panel import LedgerPanel
from workbench.ui.widgets.thermal_panel import ThermalPanel


class TelemetryFlow:
    """MainScreen's part that samples telemetry off the UI thread and sets the panels' samples."""

    def _engine_pid(self) -> int | None:
        engine = self.engine
        return engine.pid if engine is not None and getattr(engine, "alive", False) else None

    @work(thread=True, exclusive=True, group="telemetry")
    def sample_telemetry(self) -> None:
        worker = get_current_worker()
        engine_work.sample_telemetry(self.sampler_factory, self._engine_pid, self.post_message,
                                     self._telemetry_stop, lambda: worker.is_cancelled, self.telemetry_interval_s)

    def on_telemetry_sampled(self, message: TelemetrySampled) -> None:
        self.latest_sample = message.sample
        ledger_panel = self.query_one(LedgerPanel)
        if ledger_panel.shows_differently(message.sample):  # a redraw costs; most samples change nothing shown
            ledger_panel.sample = message.sample
        panel = self.query_one(ThermalPanel)
        panel.battery_wh = self._battery_wh()
        panel.sample = message.sample

    def _battery_wh(self) -> float | None:
        from workbench.core.errors import WorkbenchError

        try:
            return self.selection.device().battery_wh  # cached after the prediction's first load
        except WorkbenchError:  # a device that cannot load is the prediction's to report
            return None

    def on_telemetry_failed(self, message: TelemetryFailed) -> None:
        self.notify(message.reason, title="Telemetry unavailable", severity="warning", timeout=8)
