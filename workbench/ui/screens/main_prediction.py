"""The main screen's ledger prediction: the chosen model, preset and device, and the verdict before loading."""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.widgets import Select, Static

from workbench.core.ledger.types import DOES_NOT_FIT, TIGHT
from workbench.ui.messages import LedgerPredicted, PredictionFailed, SplitPredicted
from workbench.ui.split_prediction import predict_split_or_none
from workbench.ui.loaded_choice import choice_of
from workbench.ui.selection import model_options, preset_options
from workbench.core.units import mib
from workbench.ui.widgets.kv_panel import KvPanel
from workbench.ui.widgets.ledger_panel import LedgerPanel
from workbench.ui.widgets.speed_panel import SpeedPanel


class PredictionFlow:
    """MainScreen's part that predicts the ledger in a thread worker and shows the verdict and bound."""

    def select_model(self, path: Path, label: str | None = None) -> None:
        """Make `path` the chosen model (from the model screen), adding it to the list if new."""
        self.selection.add_model(path, label)
        select = self.query_one("#model-select", Select)
        select.set_options(model_options(self.selection))
        select.value = str(path)
        self.selection.model_path = path
        self.predict()

    def select_preset(self, name: str) -> None:
        select = self.query_one("#preset-select", Select)
        select.set_options(preset_options(self.selection, refresh=True))
        select.value = name
        self.selection.preset_name = name
        self.predict()

    @work(thread=True, exclusive=True, group="predict")
    def predict(self) -> None:
        choice = choice_of(self.selection)
        try:
            model, preset, device = self.selection.resolve()
            from workbench.core.ledger.predict import predict_ledger
            from workbench.core.config.presets import preset_problems

            ledger = predict_ledger(model, preset, device)
            problems = preset_problems(preset, model)
        except Exception as error:
            self.post_message(PredictionFailed(str(error) or type(error).__name__))
            return
        self.post_message(LedgerPredicted(model, preset, device, ledger, problems, choice))
        self.post_message(SplitPredicted(predict_split_or_none(model, preset, device, self.selection.rpc)))

    def on_split_predicted(self, message: SplitPredicted) -> None:
        self.query_one(LedgerPanel).split = message.split

    def on_ledger_predicted(self, message: LedgerPredicted) -> None:
        self.ledger = message.ledger
        ledger = message.ledger
        if message.choice is not None:
            self.loaded_choice.predicted(message.choice, ledger)
        verdict = self.query_one("#verdict", Static)
        mark = {DOES_NOT_FIT: "✘", TIGHT: "⚠"}.get(ledger.verdict, "✔")
        errors = [p for p in message.problems if p.level == "error"]
        if self.loaded_choice.differs(choice_of(self.selection)):
            # the panels keep describing what the engine runs; this line is the selection's own prediction
            text = (f"{mark} selected {ledger.preset} on {ledger.device}: {ledger.verdict.upper()}, "
                    f"{mib(ledger.total_bytes)} of {mib(ledger.budget_bytes)}; not loaded — Ctrl+L reloads with it")
        else:
            text = f"{mark} {verdict_sentence(ledger)}"
        if errors:
            text += f"  Preset problem: {errors[0].message}"
        verdict.update(text)
        verdict.set_classes({DOES_NOT_FIT: "-nofit", TIGHT: "-tight"}.get(ledger.verdict, "-fits"))
        self.show_load_button()
        self.show_on_panels(self.loaded_choice.panel_ledger(ledger))

    def show_on_panels(self, ledger) -> None:
        """The ledger and KV panels describe `ledger` (the loaded choice's while a model is loaded)."""
        self.query_one(LedgerPanel).ledger = ledger
        if ledger is None:
            return
        kv = self.query_one(KvPanel)
        kv.bytes_per_token = ledger.kv_bytes_per_token
        kv.cache_types = f"K {ledger.cache_type_k} / V {ledger.cache_type_v}"
        split = ledger.kv_split
        if split is not None:  # the grid is the global layers' cache; the window cache gets its own line
            kv.bytes_per_token = split.global_bytes // max(1, split.global_cells)
            full = ", full-size: swa_full" if split.swa_full else ""
            kv.window_layers = (f"{split.swa_layers} of {split.swa_layers + split.global_layers} layers "
                                f"keep the last {split.n_swa:,} tokens{full}")
        kv.window_cells = split.swa_cells if split is not None else 0
        self._update_bound()

    def on_prediction_failed(self, message: PredictionFailed) -> None:
        self.ledger = None
        verdict = self.query_one("#verdict", Static)
        verdict.update(f"✘ cannot predict the ledger: {message.reason}")
        verdict.set_classes("-nofit")
        self.show_on_panels(self.loaded_choice.panel_ledger(None))
        self.notify(message.reason, title="Cannot predict the ledger", severity="error", timeout=8)

    def _update_bound(self) -> None:
        """The bandwidth bound at the current context: time per token grows with the KV read."""
        ledger = self.loaded_choice.panel_ledger(self.ledger)
        speed = self.query_one(SpeedPanel)
        if ledger is None or ledger.decode_tps_bound[0] <= 0:
            speed.bound_tps = 0.0
            return
        empty, full = ledger.decode_tps_bound
        kv = self.query_one(KvPanel)
        share = kv.cells_used / kv.n_ctx if kv.n_ctx else 0.0
        seconds_per_token = 1 / empty + (1 / full - 1 / empty) * share if full > 0 else 1 / empty
        speed.bound_tps = 1 / seconds_per_token


def verdict_sentence(ledger) -> str:
    """The verdict in MiB, llama.cpp's unit, as every other figure on screen (the core's reason says MB)."""
    budget = f"the {mib(ledger.budget_bytes)} left for the LLM on {ledger.device}"
    if ledger.verdict == DOES_NOT_FIT:
        return (f"DOES NOT FIT — {mib(ledger.total_bytes)} predicted, "
                f"{mib(ledger.total_bytes - ledger.budget_bytes)} over {budget}")
    share = ledger.headroom_bytes / ledger.budget_bytes if ledger.budget_bytes else 0.0
    return (f"{ledger.verdict.upper()} — {mib(ledger.total_bytes)} predicted, {mib(ledger.headroom_bytes)} "
            f"({share:.0%}) headroom in {budget}")
