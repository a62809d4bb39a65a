"""The kept conversations: open one in the chat, rename, export (Markdown and JSON), delete (asked first)."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option

from workbench.core.errors import WorkbenchError
from workbench.core.files.conversations import (
    ConversationSummary,
    delete_conversation,
    export_conversation,
    list_conversations,
    rename_conversation,
)
from workbench.ui.screens.confirm_modal import ConfirmModal
from workbench.ui.screens.dialog_screen import DialogScreen


def summary_label(summary: ConversationSummary) -> str:
    if summary.problem:
        return f"{summary.name}  (cannot be read: {summary.problem})"
    model = Path(summary.model).name or "no model"
    return f"{summary.title}  ·  {summary.started or '?'}  ·  {summary.turns} {'turn' if summary.turns == 1 else 'turns'}  ·  {model}"


class ConversationsModal(DialogScreen[str | None]):
    """Dismisses with the name of the conversation to open in the chat, or None."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Close")]

    def __init__(self, folder: Path, export_folder: Path | None = None) -> None:
        super().__init__()
        self.folder = folder
        self.export_folder = export_folder or Path.cwd()
        self.summaries: tuple[ConversationSummary, ...] = ()

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog"):
            yield Static("Conversations", classes="dialog-title")
            yield OptionList(id="conversation-list")
            with Horizontal(id="conversation-title-row"):
                yield Input("", id="conversation-title", placeholder="a title for the highlighted conversation")
                yield Button("Rename", id="rename")
            yield Static("", id="conversation-status", markup=False)
            with Horizontal(id="conversation-buttons", classes="dialog-buttons"):
                yield Button("Close", id="close")
                yield Button("Delete", id="delete", variant="error")
                yield Button("Export", id="export")
                yield Button("Open", id="open", variant="primary")

    def on_mount(self) -> None:
        self.refresh_list()
        self.query_one(OptionList).focus()

    def refresh_list(self, highlight: str | None = None) -> None:
        self.summaries = list_conversations(self.folder)
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options([Option(summary_label(s), id=s.name) for s in self.summaries])
        names = [s.name for s in self.summaries]
        if names:
            options.highlighted = names.index(highlight) if highlight in names else 0
        else:
            self._status("No conversations kept yet: each finished answer is journaled.")
        for button in ("#open", "#export", "#delete", "#rename"):
            self.query_one(button, Button).disabled = not names

    @property
    def current(self) -> ConversationSummary | None:
        index = self.query_one(OptionList).highlighted
        return self.summaries[index] if index is not None and index < len(self.summaries) else None

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        current = self.current
        if current is not None:
            self.query_one("#conversation-title", Input).value = current.title if not current.problem else ""

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self._open()

    def _status(self, text: str) -> None:
        self.query_one("#conversation-status", Static).update(text)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        current, action = self.current, event.button.id
        if action == "close":
            self.dismiss(None)
        elif current is None:
            return
        elif action == "open":
            self._open()
        elif action == "rename":
            self._try(lambda: rename_conversation(self.folder, current.name, self.query_one("#conversation-title", Input).value),
                      f"Renamed {current.name}.", highlight=current.name)
        elif action == "export":
            base = self.export_folder / current.name
            self._try(lambda: (export_conversation(self.folder, current.name, base.with_suffix(".md")),
                               export_conversation(self.folder, current.name, base.with_suffix(".json"))),
                      f"Exported to {base}.md and {base}.json.", highlight=current.name)
        elif action == "delete":
            def answered(confirmed: bool | None) -> None:
                if confirmed:
                    self._try(lambda: delete_conversation(self.folder, current.name), f"Deleted {current.name}.")

            self.app.push_screen(ConfirmModal("Delete this conversation?", f"{current.title}: {current.turns} turns. "
                                              "Its journal is removed; an export stays.", "Delete"), answered)

    def _open(self) -> None:
        current = self.current
        if current is not None and not current.problem:
            self.dismiss(current.name)

    def _try(self, work, done: str, *, highlight: str | None = None) -> None:
        try:
            work()
        except (WorkbenchError, OSError) as error:
            self._status(str(error))
            return
        self.refresh_list(highlight)
        self._status(done)
