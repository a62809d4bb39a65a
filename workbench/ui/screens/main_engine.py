"""The main screen's engine flow: load (asking first when it does not fit), unload, restart."""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.widgets import Button, ProgressBar, Select, Static

from workbench.core.ledger.types import DOES_NOT_FIT, LedgerFix
from workbench.ui import engine_work
from workbench.ui.loaded_choice import choice_of
from workbench.ui.messages import LoadFailed, LoadProgressReported, ModelLoaded, ModelUnloaded
from workbench.ui.screens.phases import GENERATING, IDLE, LOADED, LOADING, UNLOADING
from workbench.ui.widgets.chat_view import ChatView
from workbench.ui.widgets.kv_panel import KvPanel
from workbench.ui.widgets.ledger_panel import LedgerPanel
from workbench.ui.widgets.prompt_input import PromptInput


class EngineFlow:
    """MainScreen's part that drives the engine process through thread workers and shows the phase."""

    def watch_phase(self, phase: str) -> None:
        if phase != LOADING:
            # a hidden indeterminate bar still animates (and repaints) at 15 fps: give it an end
            self.query_one("#load-progress", ProgressBar).update(total=100, progress=100)
        self.show_load_button()
        # usable while an answer streams (a change only re-predicts; loading uses it): restyling
        # three selects on and off costs ~50 ms of a core at each turn's start and end
        for select in self.query(Select):
            select.disabled = phase in (LOADING, UNLOADING)
        self.query_one("#load-progress").display = phase == LOADING
        # a blinking cursor repaints twice a second; while an answer streams every repaint is CPU the engine could use
        self.query_one(PromptInput).cursor_blink = phase != GENERATING

    def show_load_button(self) -> None:
        """Load, Unload, or Reload when the selectors name something other than what is loaded."""
        phase = self.phase
        reload = phase == LOADED and self.loaded_choice.differs(choice_of(self.selection))
        button = self.query_one("#load-button", Button)
        button.label = "Reload" if reload else {IDLE: "Load", LOADING: "Loading…", LOADED: "Unload",
                                                GENERATING: "Unload", UNLOADING: "Unloading…"}[phase]
        button.disabled = phase in (LOADING, UNLOADING)
        button.variant = "primary" if phase == IDLE or reload else "default"

    def action_toggle_load(self) -> None:
        """Ctrl+L: load; unload; or, when another choice is selected, reload with it in one press."""
        if self.phase == LOADED and self.loaded_choice.differs(choice_of(self.selection)):
            self.request_load()
        elif self.phase in (LOADED, GENERATING):
            self.unload()
        elif self.phase == IDLE:
            self.request_load()

    def request_load(self) -> None:
        """Load, asking first when the ledger says it does not fit."""
        ledger = self.ledger
        if ledger is not None and ledger.verdict == DOES_NOT_FIT:
            from workbench.ui.screens.overbudget_modal import OverbudgetModal

            def confirmed(answer: object) -> None:
                if isinstance(answer, LedgerFix):
                    self.use_fix(answer)
                elif answer:
                    self.start_load(allow_overbudget=True)

            self.app.push_screen(OverbudgetModal(ledger), confirmed)
            return
        self.start_load(allow_overbudget=False)

    def use_fix(self, fix: LedgerFix) -> None:
        """Use the preset with the fix applied, as an unsaved copy, and predict again."""
        from workbench.core.ledger.fixes import apply_fix

        label = self.selection.use_unsaved(apply_fix(self.selection.preset(), fix))
        self.select_preset(label)
        self.notify(f"{fix.change}: saves {fix.saved_bytes / 2**20:,.0f} MiB; {fix.cost}", title="Fix applied")

    def start_load(self, *, allow_overbudget: bool) -> None:
        try:
            model, preset, device = self.selection.resolve()
        except Exception as error:
            self.notify(str(error), title="Cannot load", severity="error", timeout=8)
            return
        if self.engine is None or not getattr(self.engine, "alive", False):
            if self.engine is not None:
                engine_work.close_engine(self.engine)
            try:
                self.engine = self.engine_factory()
            except Exception as error:
                self.notify(str(error), title="Cannot start the engine", severity="error", timeout=8)
                return
        self.loaded_choice.load_started(choice_of(self.selection))
        self.phase = LOADING
        progress = self.query_one("#load-progress", ProgressBar)
        progress.update(total=None, progress=0)
        self.conversation.model_name = model.name or Path(model.source).name
        self.conversation.preset_name = preset.name
        self._load_worker(self.engine, Path(model.source), preset, device, allow_overbudget)

    @work(thread=True, exclusive=True, group="engine")
    def _load_worker(self, engine, model_path, preset, device, allow_overbudget) -> None:
        engine_work.load_model(engine, model_path, preset, device, allow_overbudget, self.post_message)

    def on_load_progress_reported(self, message: LoadProgressReported) -> None:
        progress = self.query_one("#load-progress", ProgressBar)
        if message.fraction < 0:
            progress.update(total=None)
        else:
            progress.update(total=100, progress=round(message.fraction * 100))
        self.query_one("#verdict", Static).update(f"{message.stage}…")

    def on_model_loaded(self, message: ModelLoaded) -> None:
        loaded = message.loaded
        self.loaded_choice.load_finished()
        self.phase = LOADED
        self.last_failure = None
        self.conversation.engine_restarted()  # a fresh context: send only what the model saw before
        self.query_one(ChatView).query("#crash-notice").remove()
        self.query_one(ChatView).update_welcome(loaded=True)
        self.query_one(LedgerPanel).loaded = loaded
        kv = self.query_one(KvPanel)
        kv.n_ctx, kv.cells_used, kv.segments, kv.shift_notice = loaded.n_ctx, 0, (), ""
        self.predict()  # restores the verdict line that progress messages overwrote
        self.query_one(PromptInput).focus()
        kept = len(self.conversation.messages)
        note = f"; the conversation continues ({kept} messages kept)" if kept else ""
        self.notify(f"{Path(loaded.model_path).name} with {loaded.preset_name}: n_ctx {loaded.n_ctx}, "
                    f"{loaded.load_seconds:.2f} s{note}", title="Model loaded")
        for warning in loaded.warnings:
            if warning != loaded.chat_notice:
                # the preset's checks and the engine's notes, not lines of llama.cpp's log
                self.notify(warning, title="Load warning", severity="warning", timeout=8)
        if loaded.chat_notice:  # which chat path the model takes: kept in the conversation, not a toast
            self.run_worker(self.query_one(ChatView).add_notice(loaded.chat_notice, kind="info"))

    async def on_load_failed(self, message: LoadFailed) -> None:
        self.loaded_choice.unloaded()  # a failed load leaves no model in the engine
        self.phase = IDLE
        self.predict()
        failure = message.failure
        self.last_failure = failure
        details = "\n".join(failure.log_tail[-6:])
        await self.query_one(ChatView).add_notice(f"Load failed: {failure.message}", details, kind="error")
        self.notify(failure.message, title="Load failed", severity="error", timeout=10)

    def unload(self) -> None:
        if self.engine is None:
            return
        if self.phase == GENERATING:
            self.engine.cancel()
        self.phase = UNLOADING
        self._unload_worker(self.engine)

    @work(thread=True, exclusive=True, group="engine")
    def _unload_worker(self, engine) -> None:
        engine_work.unload_model(engine, self.post_message)

    def on_model_unloaded(self, message: ModelUnloaded) -> None:
        self.phase = IDLE
        self.clear_loaded_panels()
        self.notify("The engine returned the model's memory to the system.", title="Model unloaded")

    def clear_loaded_panels(self) -> None:
        """No model in memory: the ledger loses its reported column, the KV panel its cache."""
        self.loaded_choice.unloaded()
        self.query_one(ChatView).update_welcome(loaded=False)
        self.show_on_panels(self.ledger)  # the panels go back to describing the selection
        self.predict()  # and the verdict line drops its "not loaded" note
        self.query_one(LedgerPanel).loaded = None
        kv = self.query_one(KvPanel)
        kv.n_ctx, kv.cells_used, kv.segments = 0, 0, ()

    def action_restart_engine(self) -> None:
        """Start a fresh engine process and load the same model and preset again."""
        if self.phase in (LOADING, UNLOADING):
            return
        self.query_one(ChatView).query("#crash-notice").remove()  # answered: the restart is under way
        if self.engine is not None:
            old, self.engine = self.engine, None
            if getattr(old, "alive", False):
                self._close_worker(old)  # a live process takes a moment to stop: off the UI thread
            else:
                engine_work.close_engine(old)
        self.phase = IDLE
        self.start_load(allow_overbudget=self.ledger is not None and self.ledger.verdict == DOES_NOT_FIT)

    @work(thread=True, group="close")
    def _close_worker(self, engine) -> None:
        engine_work.close_engine(engine)
