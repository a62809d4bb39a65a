"""The main screen: choose and load a model, chat with it, and watch the four live panels."""

from __future__ import annotations

import threading
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.events import Key, Resize
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Input, ProgressBar, Select, Static, Tab, Tabs

from workbench.core.engine.events import EngineFailed
from workbench.core.ledger.types import Ledger
from workbench.ui import engine_work
from workbench.ui.chat_vote import VoteMode
from workbench.ui.conversation import Conversation
from workbench.ui.loaded_choice import LoadedChoice
from workbench.ui.screens.main_chat import ChatFlow
from workbench.ui.screens.main_engine import EngineFlow
from workbench.ui.screens.main_prediction import PredictionFlow
from workbench.ui.screens.main_telemetry import TelemetryFlow
from workbench.ui.screens.phases import GENERATING, IDLE, LOADED, LOADING
from workbench.ui.selection import Selection, device_options, model_options, preset_options
from workbench.ui.widgets.chat_view import AnswerBlock, ChatView
from workbench.ui.widgets.kv_panel import KvPanel
from workbench.ui.widgets.ledger_panel import LedgerPanel
from workbench.ui.widgets.prompt_input import PromptInput
from workbench.ui.widgets.speed_panel import SpeedPanel
from workbench.ui.widgets.thermal_panel import ThermalPanel

WIDE_MIN_SIZE = (120, 34)  # below this the chat and the panels become tabs
ROOMY_SIZE = (160, 48)  # below this (and above WIDE_MIN_SIZE) the panels take more of the screen
PANEL_TABS = (("chat", "Chat"), ("ledger", "Ledger"), ("kv", "KV cache"), ("speed", "Tokens/s"),
              ("thermal", "Temperature"))
# Alt+1..5 bring a tab forward (digits alone are typed into the prompt); the label shows the number
TAB_KEYS = tuple((f"alt+{number}", name) for number, (name, _) in enumerate(PANEL_TABS, start=1))


class MainScreen(PredictionFlow, EngineFlow, ChatFlow, TelemetryFlow, Screen):
    """Owns the engine client, the conversation and the workers; panels get attributes set.

    The flows live beside it (main_prediction, main_engine, main_chat, main_telemetry); here:
    the layout, the handlers wired with @on (Textual collects those from this class only), and
    the other screens.
    """

    CSS_PATH = "main_screen.tcss"
    BINDINGS = [
        Binding("ctrl+l", "toggle_load", "Load"),  # the button says Load, Unload or Reload
        Binding("escape", "cancel_turn", "Cancel"),
        Binding("ctrl+s", "save_transcript", "Save"),
        Binding("f2", "open_models", "Models"),
        Binding("f3", "open_presets", "Presets"),
        Binding("f4", "open_bench", "Bench"),
        Binding("f5", "edit_settings", "Settings"),
        Binding("f6", "open_serve", "Serve", show=False),
        Binding("ctrl+r", "restart_engine", "Restart engine", show=False),
        Binding("ctrl+n", "new_conversation", "New chat", show=False),
        Binding("ctrl+t", "cycle_vote", "N samples, vote", show=False),
        *(Binding(key, f"show_tab('{name}')", f"{name} tab", show=False) for key, name in TAB_KEYS),
        # Alt+digit reaches the app only from terminals that report modifiers (in tmux ESC 2 arrives
        # as one character): Ctrl+PgDn / Ctrl+PgUp step through the tabs everywhere
        Binding("ctrl+pagedown", "step_tab(1)", "Next tab", show=False),
        Binding("ctrl+pageup", "step_tab(-1)", "Previous tab", show=False),
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
        self.vote_mode = VoteMode()
        self.loaded_choice = LoadedChoice()  # what the engine runs; the panels describe it
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
        yield Tabs(*(Tab(f"{number} {label}", id=f"tab-{name}") for number, (name, label) in enumerate(PANEL_TABS, 1)),
                   id="layout-tabs")
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
        self.set_class(not self.compact and (width < ROOMY_SIZE[0] or height < ROOMY_SIZE[1]), "-medium")

    def watch_compact(self, compact: bool) -> None:
        self.set_class(compact, "-compact")
        self.query_one(Footer).compact = compact  # every key fits 80 columns, F5 included
        self.watch_shown_tab(self.shown_tab)

    def watch_shown_tab(self, shown: str) -> None:
        for name, _ in PANEL_TABS:
            self.set_class(shown == name, f"-show-{name}")
        if shown == "chat" and self.is_mounted:
            # back on the chat the prompt has the keys again, not the tab bar that was clicked
            self.call_after_refresh(self.query_one(PromptInput).focus)

    @on(Tabs.TabActivated, "#layout-tabs")
    def _tab_activated(self, event: Tabs.TabActivated) -> None:
        self.shown_tab = event.tab.id.removeprefix("tab-") if event.tab and event.tab.id else "chat"

    def show_tab(self, name: str) -> None:
        """Bring a panel (or the chat) to the front when the layout is tabbed."""
        self.query_one("#layout-tabs", Tabs).active = f"tab-{name}"

    def action_show_tab(self, name: str) -> None:
        self.show_tab(name)

    def action_step_tab(self, step: int) -> None:
        names = [name for name, _ in PANEL_TABS]
        self.show_tab(names[(names.index(self.shown_tab) + step) % len(names)])

    def on_key(self, event: Key) -> None:
        """Typing lands in the prompt whatever has the focus (the tab bar, a panel): never dropped."""
        if not event.is_printable or isinstance(self.focused, (Input, Select)):
            return
        if self.compact and self.shown_tab != "chat":
            self.show_tab("chat")
        prompt = self.query_one(PromptInput)
        prompt.focus()
        prompt.insert_text_at_cursor(event.character or "")
        event.stop()
        event.prevent_default()

    # ---- handlers wired with @on ---------------------------------------------------------

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

    @on(Button.Pressed, "#load-button")
    def _load_pressed(self) -> None:
        self.action_toggle_load()

    @on(Button.Pressed, "#restart-engine")
    def _restart_pressed(self) -> None:
        self.action_restart_engine()

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

    # ---- closing and other screens -------------------------------------------------------

    def on_unmount(self) -> None:
        """The app is closing: stop sampling and stop the engine process (its memory goes back)."""
        self._telemetry_stop.set()
        if self.engine is not None:
            engine_work.close_engine(self.engine)

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
            # back without choosing still re-reads the list: a save or a revert changes what a name means
            self.select_preset(name or self.selection.preset_name)

        self.app.push_screen(PresetScreen(self.selection), chosen)

    def action_open_serve(self) -> None:
        """The Serve screen: the loaded model over the OpenAI-compatible API (issue 16)."""
        from workbench.ui.screens.serve_screen import ServeScreen

        kv = self.query_one(KvPanel)
        self.app.push_screen(ServeScreen(self.engine if self.phase == LOADED else None, kv.bytes_per_token, kv.cache_types))

    def action_cycle_vote(self) -> None:
        samples = self.vote_mode.cycle()
        how = ("each answer is the majority of the samples, decoded together" if samples > 1
               else "answers stream as usual")
        self.notify(f"Chat: {self.vote_mode.label()} ({how}).", title="N samples, vote")

    def action_open_bench(self) -> None:
        try:
            from workbench.ui.screens.bench_screen import BenchScreen
        except ImportError:
            self.notify("The bench screen is not part of this build; use `workbench bench`.",
                        title="Bench", severity="warning")
            return
        # the current preset against the two the bench compares by default
        presets = tuple(dict.fromkeys((self.selection.preset_name, "quality-q8", "balanced-q4km")))
        self.app.push_screen(BenchScreen(self.selection.model_path, self.selection.device_name, presets))
