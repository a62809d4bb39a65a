"""The four live panels side by side: memory ledger, KV cache, tokens per second, temperature and power."""

from __future__ import annotations

import time
from dataclasses import replace

from textual.app import ComposeResult
from textual.containers import Grid

from workbench.core.config.host import profile_is_this_machine
from workbench.core.engine.events import Loaded, TurnFinished
from workbench.core.ledger.split_types import SplitLedger
from workbench.core.ledger.types import Ledger
from workbench.core.telemetry.sample import TelemetrySample
from workbench.ui.kv_view import KvView, decode_bound_tps
from workbench.ui.messages import TelemetryFailed, TelemetrySampled, TokensArrived
from workbench.ui.panel_views import LedgerView, ThermalView
from workbench.ui.widgets.kv_panel import KvPanel
from workbench.ui.widgets.ledger_panel import LedgerPanel
from workbench.ui.widgets.speed_panel import SpeedPanel, SpeedView
from workbench.ui.widgets.thermal_panel import ThermalPanel

LIVE_KV_INTERVAL_S = 1.0  # the KV grid follows a streaming answer once a second: redrawing it costs


class PanelGrid(Grid):
    """Owns what the panels show: one frozen view each for the ledger, KV and thermal panels (the thermal
    view holds the latest telemetry sample).

    The screen tells it what happened (a ledger, a load, a turn's tokens and its end); the telemetry
    worker posts its samples here. It builds each view and assigns it to its panel.
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.kv = KvView()
        self.ledger_view = LedgerView()
        self.thermal_view = ThermalView()
        self.battery_wh: float | None = None  # the device profile's, when it gives one
        self._turn_generated = 0  # tokens of the answer streaming now, for the live KV view
        self._settled_segments: tuple[tuple[str, int], ...] = ()
        self._kv_drawn_at = 0.0
        self._turn_start_sample: TelemetrySample | None = None  # energy per token is a difference

    def compose(self) -> ComposeResult:
        yield LedgerPanel(id="ledger-panel", classes="panel")
        yield KvPanel(id="kv-panel", classes="panel")
        yield SpeedPanel(id="speed-panel", classes="panel")
        yield ThermalPanel(id="thermal-panel", classes="panel")

    @property
    def latest_sample(self) -> TelemetrySample | None:
        return self.thermal_view.sample

    def _show_kv(self, view: KvView) -> None:
        self.kv = view
        self.query_one(KvPanel).show(view)

    def _show_ledger_view(self, view: LedgerView) -> None:
        self.ledger_view = view
        self.query_one(LedgerPanel).view = view

    def _show_thermal_view(self, view: ThermalView) -> None:
        self.thermal_view = view
        self.query_one(ThermalPanel).view = view

    def _show_bound(self) -> None:
        """The bandwidth bound at the current context (time per token grows with the KV read) and the
        speed model's prediction for the ledger described."""
        ledger = self.ledger_view.ledger
        board = ledger.device if ledger is not None and not profile_is_this_machine(ledger.device) else ""
        self.query_one(SpeedPanel).view = SpeedView(decode_bound_tps(ledger, self.kv),
                                                    ledger.speed if ledger is not None else None,
                                                    board=board, host="this machine")  # the same screen on every machine

    # ---- the ledger and the engine --------------------------------------------------------

    def show_ledger(self, ledger: Ledger | None) -> None:
        """Describe `ledger` (the loaded choice's while a model is loaded, else the selection's)."""
        self._show_ledger_view(replace(self.ledger_view, ledger=ledger))
        if ledger is not None:
            self._show_kv(self.kv.with_ledger(ledger))
            self._show_bound()

    def show_split(self, split: SplitLedger | None) -> None:
        self._show_ledger_view(replace(self.ledger_view, split=split))

    def model_loaded(self, loaded: Loaded) -> None:
        self._show_ledger_view(replace(self.ledger_view, loaded=loaded))
        board = self.query_one(SpeedPanel).view
        if board.board:  # said once per load, whichever tab is shown: the speed panel may be out of sight
            self.notify(f"{board.board} is simulated on {board.host}: the memory verdict is the board's, the "
                        f"measured tok/s are {board.host}'s; Tokens/sec shows the board's predicted rate",
                        title="simulated board", timeout=12)
        self._show_kv(replace(self.kv, n_ctx=loaded.n_ctx, cells_used=0, segments=(), shift_notice=""))

    def model_gone(self) -> None:
        """No model in memory: the ledger loses its reported column, the KV panel its cache."""
        self._show_ledger_view(replace(self.ledger_view, loaded=None))
        self._show_kv(self.kv.emptied())

    # ---- a turn ---------------------------------------------------------------------------

    def turn_started(self) -> None:
        self._turn_generated = 0
        self._settled_segments = self.kv.segments
        self._turn_start_sample = self.latest_sample
        self.query_one(SpeedPanel).turn_started()

    def tokens_arrived(self, message: TokensArrived) -> None:
        self._turn_generated += message.n_tokens
        self.query_one(SpeedPanel).tokens_arrived(message.n_tokens, message.first_timestamp, message.last_timestamp)
        now = time.monotonic()
        if self.kv.n_ctx and now - self._kv_drawn_at >= LIVE_KV_INTERVAL_S:
            # live view while streaming (at most once a second): the last turn's layout plus the answer
            self._kv_drawn_at = now
            segments = self._settled_segments + (("current", self._turn_generated),)
            self._show_kv(replace(self.kv, segments=segments,
                                  cells_used=min(self.kv.n_ctx, sum(n for _, n in segments))))

    def context_shifted(self, notice: str) -> None:
        self._show_kv(replace(self.kv, shift_notice=notice))

    def turn_ended(self, finished: TurnFinished, segments: tuple[tuple[str, int], ...]) -> None:
        self.query_one(SpeedPanel).turn_finished(finished)
        self._show_kv(replace(self.kv, n_ctx=finished.n_ctx or self.kv.n_ctx, segments=segments,
                              cells_used=finished.kv_cells_used,
                              shift_notice=self.kv.shift_notice if finished.context_shifts else ""))
        self._show_bound()
        self._show_thermal_view(self.thermal_view.after_turn(self._turn_start_sample, self.latest_sample,
                                                             finished.generated_tokens))

    # ---- telemetry ------------------------------------------------------------------------

    def on_telemetry_sampled(self, message: TelemetrySampled) -> None:
        message.stop()
        self._show_ledger_view(self.ledger_view.with_sample(message.sample))
        self._show_thermal_view(replace(self.thermal_view, sample=message.sample, battery_wh=self.battery_wh))

    def on_telemetry_failed(self, message: TelemetryFailed) -> None:
        message.stop()
        self.notify(message.reason, title="Telemetry unavailable", severity="warning", timeout=8)
