"""A screen whose chat and panels sit side by side when there is room, and become tabs when there is not."""

from __future__ import annotations

from textual import on
from textual.binding import Binding
from textual.events import Key, Resize
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Input, Select, Tab, Tabs

from workbench.ui.widgets.key_footer import KeyFooter

WIDE_MIN_SIZE = (120, 34)  # below this the chat and the panels become tabs
ROOMY_SIZE = (160, 48)  # below this (and above WIDE_MIN_SIZE) the panels take more of the screen
PANEL_TABS = (("chat", "Chat"), ("ledger", "Ledger"), ("kv", "KV cache"), ("speed", "Tokens/s"),
              ("thermal", "Temperature"))
# Alt+1..5 bring a tab forward (digits alone are typed into the prompt); the label shows the number
TAB_KEYS = tuple((f"alt+{number}", name) for number, (name, _) in enumerate(PANEL_TABS, start=1))


class TabbedLayoutScreen(Screen):
    """Owns `compact` and `shown_tab`; sets the classes the screen's CSS lays out by (-compact, -medium, -show-…).

    The screen composes `layout_tabs()` and says in `focus_chat()` what takes the keys on the chat tab.
    """

    BINDINGS = [
        *(Binding(key, f"show_tab('{name}')", f"{name} tab", show=False) for key, name in TAB_KEYS),
        # Alt+digit reaches the app only from terminals that report modifiers (in tmux ESC 2 arrives
        # as one character): Ctrl+PgDn / Ctrl+PgUp step through the tabs everywhere
        Binding("ctrl+pagedown", "step_tab(1)", "Next tab", show=False),
        Binding("ctrl+pageup", "step_tab(-1)", "Previous tab", show=False),
    ]

    compact: reactive[bool] = reactive(False)
    shown_tab: reactive[str] = reactive("chat")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # The layout classes for the app's size from the start: set before the widgets mount, they are styled
        # once; set on mount, every widget would be styled again.
        width, height = self.app.size
        self._medium = self._is_medium(width, height)
        self.set_reactive(TabbedLayoutScreen.compact, self._is_compact(width, height))
        self._set_layout_classes(update=False)

    @staticmethod
    def _is_compact(width: int, height: int) -> bool:
        return width < WIDE_MIN_SIZE[0] or height < WIDE_MIN_SIZE[1]

    @staticmethod
    def _is_medium(width: int, height: int) -> bool:
        return not TabbedLayoutScreen._is_compact(width, height) and (width < ROOMY_SIZE[0] or height < ROOMY_SIZE[1])

    @staticmethod
    def layout_tabs() -> Tabs:
        return Tabs(*(Tab(f"{number} {label}", id=f"tab-{name}") for number, (name, label) in enumerate(PANEL_TABS, 1)),
                    id="layout-tabs")

    def focus_chat(self) -> None:
        """Give the keys to the chat (the screen knows its prompt)."""

    def type_into_chat(self, character: str) -> None:
        """A key typed while something else had the focus: the screen puts it where the chat is typed."""

    def on_key(self, event: Key) -> None:
        """Typing lands in the chat whatever has the focus (the tab bar, a panel): never dropped."""
        if not event.is_printable or isinstance(self.focused, (Input, Select)):
            return
        if self.compact and self.shown_tab != "chat":
            self.show_tab("chat")
        self.type_into_chat(event.character or "")
        event.stop()
        event.prevent_default()

    def on_mount(self) -> None:
        self._apply_size(self.app.size.width, self.app.size.height)

    def on_resize(self, event: Resize) -> None:
        self._apply_size(event.size.width, event.size.height)

    def _apply_size(self, width: int, height: int) -> None:
        self._medium = self._is_medium(width, height)
        self.compact = self._is_compact(width, height)
        self._set_layout_classes()
        footer = self.query_one(Footer)
        footer.compact = width < ROOMY_SIZE[0]  # one space between keys: every key fits 120 columns
        if isinstance(footer, KeyFooter):
            footer.rows = 1 if width >= WIDE_MIN_SIZE[0] else 2  # every key stays on screen

    def _set_layout_classes(self, *, update: bool = True) -> None:
        """-compact, -medium and the one -show-<tab>, then the screen restyled once: each class change of the
        screen restyles every widget on it, so changing them one by one did that up to seven times."""
        before = set(self.classes)
        self.set_class(self.compact, "-compact", update=False)
        self.set_class(self._medium, "-medium", update=False)
        for name, _ in PANEL_TABS:
            self.set_class(self.shown_tab == name, f"-show-{name}", update=False)
        if update and set(self.classes) != before:
            self.update_node_styles()

    def watch_compact(self, compact: bool) -> None:
        self.watch_shown_tab(self.shown_tab)

    def watch_shown_tab(self, shown: str) -> None:
        self._set_layout_classes()
        if shown == "chat" and self.is_mounted:
            # back on the chat the prompt has the keys again, not the tab bar that was clicked
            self.call_after_refresh(self.focus_chat)

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
