"""The main screen: choose and load a model, chat with it, and watch the four live panels."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.events import Resize
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Input, ProgressBar, Select, Static, Tab, Tabs
from textual.worker import get_current_worker

from workbench.core.engine.events import EngineFailed
from workbench.core.ledger_types import DOES_NOT_FIT, TIGHT, Ledger
from workbench.ui import engine_work
from workbench.ui.conversation import Conversation, stats_line
from workbench.ui.kv_layout import kv_segments
from workbench.ui.messages import (
    ContextShiftNoticed,
    EngineDied,
    LedgerPredicted,
    LoadFailed,
    LoadProgressReported,
    ModelLoaded,
    ModelUnloaded,
    PredictionFailed,
    TelemetryFailed,
    TelemetrySampled,
    TokensArrived,
    TurnEnded,
)
from workbench.ui.selection import Selection, device_options, model_options, preset_options
from workbench.ui.units import mib
from workbench.ui.widgets.chat_view import AnswerBlock, ChatView
from workbench.ui.widgets.kv_panel import KvPanel
from workbench.ui.widgets.ledger_panel import LedgerPanel
from workbench.ui.widgets.prompt_input import PromptInput
from workbench.ui.widgets.speed_panel import SpeedPanel
from workbench.ui.widgets.thermal_panel import ThermalPanel

LIVE_KV_INTERVAL_S = 1.0  # the KV grid follows a streaming answer once a second: redrawing it costs
WIDE_MIN_SIZE = (120, 34)  # below this the chat and the panels become tabs
PANEL_TABS = (("chat", "Chat"), ("ledger", "Ledger"), ("kv", "KV cache"), ("speed", "Tokens/s"),
              ("thermal", "Temperature"))

# phases of the engine as the screen sees it
IDLE, LOADING, LOADED, GENERATING, UNLOADING = "idle", "loading", "loaded", "generating", "unloading"


class MainScreen(Screen):
    """Owns the engine client, the conversation and the workers; panels get attributes set."""

    CSS_PATH = "main_screen.tcss"
    BINDINGS = [
        Binding("ctrl+l", "toggle_load", "Load/Unload"),
        Binding("escape", "cancel_turn", "Cancel"),
        Binding("ctrl+s", "save_transcript", "Save"),
        Binding("f2", "open_models", "Models"),
        Binding("f3", "open_presets", "Presets"),
        Binding("f4", "open_bench", "Bench"),
        Binding("f5", "edit_settings", "Settings"),
        Binding("ctrl+r", "restart_engine", "Restart engine", show=False),
        Binding("ctrl+n", "new_conversation", "New chat", show=False),
    ]

    phase: reactive[str] = reactive(IDLE)
    compact: reactive[bool] = reactive(False)
    shown_tab: reactive[str] = reactive("chat")

    def __init__(self, selection: Selection, engine_factory, sampler_factory, *,
                 telemetry_interval_s: float = 0.5, token_batch_interval_s: float = 0.1) -> None:
        super().__init__()
        self.selection = selection
        self.engine_factory = engine_factory
        self.sampler_factory = sampler_factory
        self.telemetry_interval_s = telemetry_interval_s
        self.token_batch_interval_s = token_batch_interval_s
        self.engine = None
        self.conversation = Conversation()
        self.ledger: Ledger | None = None
        self.last_failure: EngineFailed | None = None
        self.latest_sample = None
        self._answer: AnswerBlock | None = None
        self._turn_generated = 0
        self._settled_segments: tuple[tuple[str, int], ...] = ()
        self._kv_drawn_at = 0.0
        self._turn_start_sample = None  # telemetry at the turn's start: energy per token is a difference
        self._telemetry_stop = threading.Event()

    # ---- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(icon="▦")
        with Horizontal(id="selectors"):
            yield Select(model_options(self.selection), id="model-select", allow_blank=False,
                         value=str(self.selection.model_path), prompt="model")
            yield Select(preset_options(self.selection), id="preset-select", allow_blank=False,
                         value=self.selection.preset_name, prompt="preset")
            yield Select(device_options(self.selection), id="device-select", allow_blank=False,
                         value=self.selection.device_name, prompt="device")
            yield Button("Load", id="load-button", variant="primary")
        with Horizontal(id="status-row"):
            yield Static("Predicting the memory ledger…", id="verdict", markup=False)
            yield ProgressBar(id="load-progress", show_eta=False)
        yield Tabs(*(Tab(label, id=f"tab-{name}") for name, label in PANEL_TABS), id="layout-tabs")
        with Horizontal(id="body"):
            with Vertical(id="chat-pane"):
                yield ChatView(id="chat")
                yield PromptInput(id="prompt", placeholder="Ask the model…  Enter sends · Esc cancels · ↑↓ history")
            with Grid(id="panels"):
                yield LedgerPanel(id="ledger-panel", classes="panel")
                yield KvPanel(id="kv-panel", classes="panel")
                yield SpeedPanel(id="speed-panel", classes="panel")
                yield ThermalPanel(id="thermal-panel", classes="panel")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "Edge LLM Workbench"
        self._apply_size(self.app.size.width, self.app.size.height)
        self.query_one("#load-progress").display = False
        self.watch_phase(self.phase)
        self.query_one(PromptInput).focus()
        self.call_later(self.query_one(ChatView).show_welcome)
        # the workers start once the first frame is on screen: their threads compete for the GIL
        self.call_after_refresh(self._start_workers)

    def _start_workers(self) -> None:
        self.predict()
        self.sample_telemetry()

    def on_resize(self, event: Resize) -> None:
        self._apply_size(event.size.width, event.size.height)

    def _apply_size(self, width: int, height: int) -> None:
        self.compact = width < WIDE_MIN_SIZE[0] or height < WIDE_MIN_SIZE[1]

    def watch_compact(self, compact: bool) -> None:
        self.set_class(compact, "-compact")
        self.watch_shown_tab(self.shown_tab)

    def watch_shown_tab(self, shown: str) -> None:
        for name, _ in PANEL_TABS:
            self.set_class(shown == name, f"-show-{name}")

    @on(Tabs.TabActivated, "#layout-tabs")
    def _tab_activated(self, event: Tabs.TabActivated) -> None:
        self.shown_tab = event.tab.id.removeprefix("tab-") if event.tab and event.tab.id else "chat"

    def show_tab(self, name: str) -> None:
        """Bring a panel (or the chat) to the front when the layout is tabbed."""
        self.query_one("#layout-tabs", Tabs).active = f"tab-{name}"

    # ---- selection and prediction -------------------------------------------------------

    @on(Select.Changed)
    def _selection_changed(self, event: Select.Changed) -> None:
        if event.value is Select.BLANK:
            return
        current = {"model-select": str(self.selection.model_path), "preset-select": self.selection.preset_name,
                   "device-select": self.selection.device_name}
        if current.get(event.select.id or "") == str(event.value):
            return  # the initial value announcing itself: the prediction is already running
        if event.select.id == "model-select":
            self.selection.model_path = Path(str(event.value))
        elif event.select.id == "preset-select":
            self.selection.preset_name = str(event.value)
        elif event.select.id == "device-select":
            self.selection.device_name = str(event.value)
        self.predict()

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
        try:
            model, preset, device = self.selection.resolve()
            from workbench.core.ledger import predict_ledger
            from workbench.core.presets import preset_problems

            ledger = predict_ledger(model, preset, device)
            problems = preset_problems(preset, model)
        except Exception as error:
            self.post_message(PredictionFailed(str(error) or type(error).__name__))
            return
        self.post_message(LedgerPredicted(model, preset, device, ledger, problems))

    def on_ledger_predicted(self, message: LedgerPredicted) -> None:
        self.ledger = message.ledger
        ledger = message.ledger
        verdict = self.query_one("#verdict", Static)
        mark = {DOES_NOT_FIT: "✘", TIGHT: "⚠"}.get(ledger.verdict, "✔")
        errors = [p for p in message.problems if p.level == "error"]
        text = f"{mark} {ledger.verdict.upper()} — {ledger.reason}"
        if errors:
            text += f"  Preset problem: {errors[0].message}"
        verdict.update(text)
        verdict.set_classes({DOES_NOT_FIT: "-nofit", TIGHT: "-tight"}.get(ledger.verdict, "-fits"))
        self.query_one(LedgerPanel).ledger = ledger
        kv = self.query_one(KvPanel)
        kv.bytes_per_token = ledger.kv_bytes_per_token
        kv.cache_types = f"K {ledger.cache_type_k} / V {ledger.cache_type_v}"
        self._update_bound()

    def on_prediction_failed(self, message: PredictionFailed) -> None:
        self.ledger = None
        verdict = self.query_one("#verdict", Static)
        verdict.update(f"✘ cannot predict the ledger: {message.reason}")
        verdict.set_classes("-nofit")
        self.query_one(LedgerPanel).ledger = None
        self.notify(message.reason, title="Cannot predict the ledger", severity="error", timeout=8)

    def _update_bound(self) -> None:
        """The bandwidth bound at the current context: time per token grows with the KV read."""
        ledger = self.ledger
        speed = self.query_one(SpeedPanel)
        if ledger is None or ledger.decode_tps_bound[0] <= 0:
            speed.bound_tps = 0.0
            return
        empty, full = ledger.decode_tps_bound
        kv = self.query_one(KvPanel)
        share = kv.cells_used / kv.n_ctx if kv.n_ctx else 0.0
        seconds_per_token = 1 / empty + (1 / full - 1 / empty) * share if full > 0 else 1 / empty
        speed.bound_tps = 1 / seconds_per_token

    # ---- load / unload / restart --------------------------------------------------------

    def watch_phase(self, phase: str) -> None:
        if phase != LOADING:
            # a hidden indeterminate bar still animates (and repaints) at 15 fps: give it an end
            self.query_one("#load-progress", ProgressBar).update(total=100, progress=100)
        button = self.query_one("#load-button", Button)
        button.label = {IDLE: "Load", LOADING: "Loading…", LOADED: "Unload", GENERATING: "Unload",
                        UNLOADING: "Unloading…"}[phase]
        button.disabled = phase in (LOADING, UNLOADING)
        button.variant = "primary" if phase == IDLE else "default"
        # usable while an answer streams (a change only re-predicts; loading uses it): restyling
        # three selects on and off costs ~50 ms of a core at each turn's start and end
        for select in self.query(Select):
            select.disabled = phase in (LOADING, UNLOADING)
        self.query_one("#load-progress").display = phase == LOADING
        # a blinking cursor repaints twice a second; while an answer streams every repaint is CPU the engine could use
        self.query_one(PromptInput).cursor_blink = phase != GENERATING

    @on(Button.Pressed, "#load-button")
    def _load_pressed(self) -> None:
        self.action_toggle_load()

    def action_toggle_load(self) -> None:
        if self.phase in (LOADED, GENERATING):
            self.unload()
        elif self.phase == IDLE:
            self.request_load()

    def request_load(self) -> None:
        """Load, asking first when the ledger says it does not fit."""
        ledger = self.ledger
        if ledger is not None and ledger.verdict == DOES_NOT_FIT:
            from workbench.ui.screens.overbudget_modal import OverbudgetModal

            def confirmed(answer: bool | None) -> None:
                if answer:
                    self.start_load(allow_overbudget=True)

            self.app.push_screen(OverbudgetModal(ledger), confirmed)
            return
        self.start_load(allow_overbudget=False)

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
        self.phase = LOADED
        self.last_failure = None
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
            self.notify(warning, title="llama.cpp warning", severity="warning", timeout=8)

    async def on_load_failed(self, message: LoadFailed) -> None:
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
        self.query_one(LedgerPanel).loaded = None
        kv = self.query_one(KvPanel)
        kv.n_ctx, kv.cells_used, kv.segments = 0, 0, ()
        self.notify("The engine returned the model's memory to the system.", title="Model unloaded")

    def action_restart_engine(self) -> None:
        """Start a fresh engine process and load the same model and preset again."""
        if self.phase in (LOADING, UNLOADING):
            return
        if self.engine is not None:
            old, self.engine = self.engine, None
            engine_work.close_engine(old) if not getattr(old, "alive", False) else self._close_worker(old)
        self.phase = IDLE
        self.start_load(allow_overbudget=self.ledger is not None and self.ledger.verdict == DOES_NOT_FIT)

    @work(thread=True, group="close")
    def _close_worker(self, engine) -> None:
        engine_work.close_engine(engine)

    @on(Button.Pressed, "#restart-engine")
    def _restart_pressed(self) -> None:
        self.action_restart_engine()

    # ---- chat -----------------------------------------------------------------------------

    @on(Input.Submitted, "#prompt")
    async def _prompt_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        if self.phase != LOADED:
            hint = {GENERATING: "wait for the answer or press Esc", LOADING: "the model is still loading"}.get(
                self.phase, "load a model first (Ctrl+L)")
            self.notify(hint, title="Not sent", severity="warning")
            return
        prompt = self.query_one(PromptInput)
        prompt.remember(text)
        prompt.value = ""
        await self.send(text)

    async def send(self, text: str) -> None:
        self.conversation.add_user(text)
        self._answer = await self.query_one(ChatView).start_turn(text)
        self._turn_generated = 0
        self._settled_segments = self.query_one(KvPanel).segments
        self._turn_start_sample = self.latest_sample
        self.query_one(SpeedPanel).turn_started()
        self.phase = GENERATING
        self._chat_worker(self.engine, self.conversation.for_engine(), self.conversation.sampling)

    @work(thread=True, exclusive=True, group="chat")
    def _chat_worker(self, engine, messages, sampling) -> None:
        engine_work.stream_turn(engine, messages, sampling, self.post_message, self.token_batch_interval_s)

    async def on_tokens_arrived(self, message: TokensArrived) -> None:
        if self._answer is not None:
            await self._answer.append(message.text)
        self._turn_generated += message.n_tokens
        self.query_one(SpeedPanel).tokens_arrived(message.n_tokens, message.first_timestamp, message.last_timestamp)
        kv = self.query_one(KvPanel)
        now = time.monotonic()
        if kv.n_ctx and now - self._kv_drawn_at >= LIVE_KV_INTERVAL_S:
            # live view while streaming (at most twice a second): the last turn's layout plus the answer
            self._kv_drawn_at = now
            segments = self._settled_segments + (("current", self._turn_generated),)
            kv.show_cells(segments, min(kv.n_ctx, sum(n for _, n in segments)))

    def on_context_shift_noticed(self, message: ContextShiftNoticed) -> None:
        shift = message.shift
        notice = f"context shift: {shift.turns_dropped} earlier turns ({shift.tokens_dropped} tokens) dropped to fit n_ctx"
        self.query_one(KvPanel).shift_notice = notice
        self.notify(notice, title="Context full", severity="warning", timeout=8)

    async def on_turn_ended(self, message: TurnEnded) -> None:
        finished = message.finished
        if finished.text or finished.stop_reason != "cancelled":
            self.conversation.add_answer(finished)
        else:
            self.query_one(PromptInput).value = self.conversation.drop_unanswered()
        if self._answer is not None:
            await self._answer.finish(stats_line(finished))
            self._answer = None
        self.phase = LOADED if self.engine is not None and self.engine.loaded is not None else IDLE
        self.query_one(SpeedPanel).turn_finished(finished)
        kv = self.query_one(KvPanel)
        kv.n_ctx = finished.n_ctx or kv.n_ctx
        kv.segments = kv_segments(self.conversation, finished)
        kv.cells_used = finished.kv_cells_used
        if not finished.context_shifts:
            kv.shift_notice = ""
        self._update_bound()
        self.query_one(ThermalPanel).turn_energy(self._turn_start_sample, self.latest_sample,
                                                 finished.generated_tokens)

    async def on_engine_died(self, message: EngineDied) -> None:
        failure = message.failure
        self.last_failure = failure
        alive = self.engine is not None and getattr(self.engine, "alive", False) and failure.kind != "crash"
        if self._answer is not None:
            await self._answer.finish(f"no answer: {failure.message}", failed=True)
            self._answer = None
        unanswered = self.conversation.drop_unanswered()
        prompt = self.query_one(PromptInput)
        if unanswered and not prompt.value.strip():
            prompt.value = unanswered  # ready to send again after a restart
        elif unanswered:
            prompt.remember(unanswered)  # the box holds a draft: the lost prompt waits one ↑ away
        chat = self.query_one(ChatView)
        if alive:
            self.phase = LOADED if self.engine.loaded is not None else IDLE
            await chat.add_notice(f"Request failed: {failure.message}", "\n".join(failure.log_tail[-6:]), kind="error")
            self.notify(failure.message, title="Request failed", severity="error", timeout=8)
            return
        self.phase = IDLE
        self.query_one(LedgerPanel).loaded = None
        kv = self.query_one(KvPanel)
        kv.n_ctx, kv.cells_used, kv.segments = 0, 0, ()  # the dead process's cache is gone with it
        how = failure.exit_signal or (f"exit code {failure.exit_code}" if failure.exit_code is not None else failure.kind)
        prediction = failure.prediction or (
            f"the ledger predicted {mib(self.ledger.total_bytes)} of {mib(self.ledger.budget_bytes)}"
            if self.ledger else "no ledger prediction")
        details = "\n".join(["last llama.cpp log lines:", *failure.log_tail[-8:], f"prediction: {prediction}",
                             "The conversation is kept; Restart engine (Ctrl+R) loads the model again."])
        await chat.add_notice(f"Engine died ({how}): {failure.message}", details, kind="error",
                              action=("restart-engine", "Restart engine"))
        self.notify(f"{how}: {failure.message}", title="Engine died", severity="error", timeout=12)

    def action_cancel_turn(self) -> None:
        if self.phase == GENERATING and self.engine is not None:
            self.engine.cancel()  # thread-safe: the turn ends with stop reason "cancelled"

    # ---- telemetry ------------------------------------------------------------------------

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
        self.query_one(ThermalPanel).sample = message.sample

    def on_telemetry_failed(self, message: TelemetryFailed) -> None:
        self.notify(message.reason, title="Telemetry unavailable", severity="warning", timeout=8)

    def on_unmount(self) -> None:
        """The app is closing: stop sampling and stop the engine process (its memory goes back)."""
        self._telemetry_stop.set()
        if self.engine is not None:
            engine_work.close_engine(self.engine)

    # ---- conversation settings, transcript, other screens ---------------------------------

    def action_edit_settings(self) -> None:
        from workbench.ui.screens.settings_modal import SettingsModal

        def applied(result) -> None:
            if result is not None:
                self.conversation.system_prompt, self.conversation.sampling = result
                self.notify("System prompt and sampling apply from the next turn.", title="Settings")

        self.app.push_screen(SettingsModal(self.conversation.system_prompt, self.conversation.sampling), applied)

    def action_save_transcript(self) -> None:
        from workbench.ui.screens.save_modal import SaveTranscriptModal

        if not self.conversation.messages:
            self.notify("Nothing to save yet.", title="Transcript", severity="warning")
            return
        self.app.push_screen(SaveTranscriptModal(self.conversation))

    async def action_new_conversation(self) -> None:
        if self.phase == GENERATING:
            self.notify("Cancel the answer first (Esc).", severity="warning")
            return
        self.conversation.clear()
        chat = self.query_one(ChatView)
        await chat.clear()
        await chat.show_welcome()
        self.notify("Started a new conversation.", title="Chat")

    def action_open_models(self) -> None:
        from workbench.ui.screens.model_screen import ModelScreen

        def chosen(result) -> None:
            if result is not None:
                path, label = result
                self.select_model(Path(path), label)

        # installed, not pushed fresh: a hub download keeps running while the user chats
        if not self.app.is_screen_installed("models"):
            self.app.install_screen(ModelScreen(self.selection), "models")
        self.app.push_screen("models", chosen)

    def offer_model(self, path: Path, label: str | None = None) -> None:
        """Add a model (a finished download) to the model list without switching to it."""
        self.selection.add_model(path, label)
        select = self.query_one("#model-select", Select)
        current = select.value
        select.set_options(model_options(self.selection))
        select.value = current

    def action_open_presets(self) -> None:
        from workbench.ui.screens.preset_screen import PresetScreen

        def chosen(name: str | None) -> None:
            if name:
                self.select_preset(name)

        self.app.push_screen(PresetScreen(self.selection), chosen)

    def action_open_bench(self) -> None:
        try:
            from workbench.ui.bench_screen import BenchScreen
        except ImportError:
            self.notify("The bench screen is not part of this build; use `workbench bench`.",
                        title="Bench", severity="warning")
            return
        # the current preset against the two the bench compares by default
        presets = tuple(dict.fromkeys((self.selection.preset_name, "quality-q8", "balanced-q4km")))
        self.app.push_screen(BenchScreen(self.selection.model_path, self.selection.device_name, presets))
