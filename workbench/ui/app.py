"""The Textual app: themes, the main screen, and every action in the command palette."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from workbench.core.config.app_settings import CHAT_SHARE_RANGE
from workbench.core.engine.client import EngineClient
from workbench.core.errors import WorkbenchError
from workbench.core.files.chat_journal import find_journal, read_journal
from workbench.core.telemetry.sampler import Sampler
from workbench.ui.remembered import SettingsKeeper
from workbench.ui.screens.confirm_modal import ConfirmModal
from workbench.ui.screens.conversations_modal import ConversationsModal
from workbench.ui.screens.main_screen import MainScreen
from workbench.ui.screens.model_screen import ModelScreen
from workbench.ui.selection import Selection
from workbench.ui.textual_fixes import release_styles_caches
from workbench.ui.themes import APP_COLOUR_DEFAULTS, DEFAULT_THEME, load_themes


def default_engine_factory():
    """The real engine client (its process starts with the first load)."""
    return EngineClient()


def default_sampler_factory(engine_pid: int | None):
    return Sampler(root="/", engine_pid=engine_pid)


# (title, help, MainScreen action) for the command palette; the footer shows the key bindings
MAIN_COMMANDS = (
    ("Load or unload the model", "Load the chosen model with the chosen preset, or unload it", "toggle_load"),
    ("Cancel the answer", "Stop generating (Esc)", "cancel_turn"),
    ("Restart engine", "Start a fresh engine process and load the model again", "restart_engine"),
    ("Save transcript", "Write the conversation as Markdown and JSON", "save_transcript"),
    ("System prompt and sampling", "Edit the system prompt, temperature, top-p, max tokens, ...", "edit_settings"),
    ("New conversation", "Clear the chat (the model stays loaded)", "new_conversation"),
    ("Models", "Bundled, local and cached models, the hub, and their inspect summary", "open_models"),
    ("Presets", "Browse, edit and save presets; copy the llama-server command", "open_presets"),
    ("Bench", "Measure speed and quality for the loaded model", "open_bench"),
)
CHAT_SHARE_STEP = 5  # percent of the width per "wider / narrower chat" command


class WorkbenchApp(App):
    """`engine_factory()` makes an engine client; `sampler_factory(engine_pid)` a telemetry sampler."""

    TITLE = "Edge LLM Workbench"
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", priority=True)]  # Textual's own, shown in the footer
    # the default screen is not "pushed", so Textual would not load its CSS_PATH: the app loads it
    CSS_PATH = ["app.tcss", "screens/main_screen.tcss"]

    def __init__(self, selection: Selection, *, engine_factory: Callable | None = None,
                 sampler_factory: Callable | None = None, theme_name: str | None = None,
                 telemetry_interval_s: float = 0.5, token_batch_interval_s: float = 0.1,
                 keeper: SettingsKeeper | None = None, startup_notes: tuple[str, ...] = ()) -> None:
        release_styles_caches()
        super().__init__()
        self.selection = selection
        self.keeper = keeper  # None: nothing is remembered (a test's app)
        self.startup_notes = [note for note in startup_notes if note]
        self.engine_factory = engine_factory or default_engine_factory
        self.sampler_factory = sampler_factory or default_sampler_factory
        self.telemetry_interval_s = telemetry_interval_s
        self.token_batch_interval_s = token_batch_interval_s
        self.startup_problems: list[str] = []
        try:
            for theme in load_themes():
                self.register_theme(theme)
        except Exception as error:  # a broken theme file must not keep the app from starting
            self.startup_problems.append(str(error))
        wanted = theme_name or DEFAULT_THEME
        if wanted in self.available_themes:
            self.theme = wanted
        else:
            self.startup_problems.append(
                f"unknown theme {wanted!r}; choose one of {', '.join(sorted(self.available_themes))}")
            if DEFAULT_THEME in self.available_themes:
                self.theme = DEFAULT_THEME

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_COLOUR_DEFAULTS)

    def get_default_screen(self) -> Screen:
        return MainScreen(self.selection, self.engine_factory, self.sampler_factory,
                          telemetry_interval_s=self.telemetry_interval_s,
                          token_batch_interval_s=self.token_batch_interval_s)

    @property
    def main_screen(self):
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                return screen
        raise LookupError("the main screen is not running")

    def on_model_screen_model_offered(self, message) -> None:
        """A download finished while the model screen was away: the main screen's list offers it."""
        try:
            self.main_screen.post_message(ModelScreen.ModelOffered(message.path))
        except LookupError:
            pass  # the app is closing

    def on_mount(self) -> None:
        for problem in self.startup_problems:
            self.notify(problem, title="Theme", severity="warning", timeout=10)
        for note in self.startup_notes:
            self.notify(note, title="Settings", severity="warning", timeout=10)
        if self.keeper is not None:
            self._remembered(self.keeper.remember_choice(self.selection.choice()))
            self.theme_changed_signal.subscribe(self, lambda theme: self._remembered(self.keeper.remember_theme(theme.name)))
            if self.keeper.settings.chat_share:
                self.call_after_refresh(self._apply_chat_share, self.keeper.settings.chat_share)

    def on_choice_bar_changed(self, message) -> None:
        """The model, preset or device chosen (bubbled from the main screen's choice bar) is remembered."""
        if self.keeper is not None:
            self._remembered(self.keeper.remember_choice(message.choice, tuple(self.selection.unsaved_presets)))

    def action_conversations(self) -> None:
        """The kept conversations; the one chosen opens in the chat in place of the current one."""
        try:
            chat = self.main_screen.chat_pane
        except LookupError:
            return

        def chosen(name: str | None) -> None:
            if not name:
                return
            try:
                found = read_journal(find_journal(chat.journal_folder, name))
            except WorkbenchError as error:
                self.notify(str(error), title="Conversations", severity="error", timeout=10)
                return
            chat.open_conversation(found)

        self.push_screen(ConversationsModal(chat.journal_folder), chosen)

    def on_settings_modal_prompt_saved(self, message) -> None:
        """A system prompt saved in F5 is kept in the settings file."""
        if self.keeper is None:
            return
        try:
            self._remembered(self.keeper.save_prompt(message.name, message.text))
        except WorkbenchError as error:
            self._remembered(str(error))

    def _remembered(self, problem: str) -> None:
        if problem:
            self.notify(problem, title="Settings", severity="warning", timeout=10)

    def change_chat_share(self, step: int) -> None:
        """Give the chat pane `step` percent more (or less) of the width beside the panels, and remember it."""
        current = self.keeper.settings.chat_share if self.keeper is not None and self.keeper.settings.chat_share else 40
        share = self._apply_chat_share(current + step)
        if self.keeper is not None:
            self._remembered(self.keeper.remember_chat_share(share))

    def _apply_chat_share(self, percent: int) -> int:
        low, high = CHAT_SHARE_RANGE
        share = max(low, min(high, percent))
        try:
            main = self.main_screen
        except LookupError:
            return share
        main.query_one("#chat-pane").styles.width = f"{share}fr"
        main.query_one("#panels").styles.width = f"{100 - share}fr"
        return share

    async def action_quit(self) -> None:
        """Quit; a conversation no saved transcript holds is discarded only when the user says so."""
        try:
            conversation = self.main_screen.conversation
        except LookupError:
            conversation = None
        if conversation is None or not conversation.unsaved:
            self.exit()
            return

        def answered(discard: bool | None) -> None:
            if discard:
                self.exit()

        self.push_screen(ConfirmModal(
            "Quit and discard the conversation?",
            f"Its {len(conversation.messages)} messages are not in a saved transcript. Back, then Ctrl+S, "
            "saves them first.", "Quit"), answered)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        try:
            main = self.main_screen
        except LookupError:
            return
        for title, help_text, action in MAIN_COMMANDS:
            yield SystemCommand(title, help_text, getattr(main, f"action_{action}"))
        yield SystemCommand("Conversations", "The kept conversations: open, rename, export, delete",
                            self.action_conversations)
        yield SystemCommand("Wider chat", "Give the chat more of the width beside the panels (remembered)",
                            lambda: self.change_chat_share(CHAT_SHARE_STEP))
        yield SystemCommand("Narrower chat", "Give the panels more of the width beside the chat (remembered)",
                            lambda: self.change_chat_share(-CHAT_SHARE_STEP))
