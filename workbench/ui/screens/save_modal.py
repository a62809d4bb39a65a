"""Asks for the transcript's file name, then writes it as Markdown and JSON."""

from __future__ import annotations

import time
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Input, Static

from workbench.ui.conversation import Conversation, save_transcript
from workbench.ui.screens.dialog_screen import DialogScreen


def default_transcript_base() -> Path:
    return Path.cwd() / time.strftime("transcript-%Y%m%d-%H%M%S")


class SaveTranscriptModal(DialogScreen[tuple[Path, Path] | None]):
    """Dismisses with the two written paths, or None when cancelled."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, conversation: Conversation, base: Path | None = None) -> None:
        super().__init__()
        self.conversation = conversation
        self.base = base or default_transcript_base()

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog"):
            yield Static("Save transcript", classes="dialog-title")
            yield Static("Writes NAME.md and NAME.json (relative names are in the current folder).",
                         classes="dialog-body")
            yield Input(str(self.base), id="transcript-path")
            yield Static("", id="save-problem", classes="problems")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Save", id="save", variant="primary")

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        self._save()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
        else:
            self._save()

    def _save(self) -> None:
        text = self.query_one("#transcript-path", Input).value.strip()
        if not text:
            self.query_one("#save-problem", Static).update("Give a file name.")
            return
        try:
            paths = save_transcript(self.conversation, Path(text).expanduser())
        except OSError as error:
            self.query_one("#save-problem", Static).update(f"{text}: cannot write ({error.strerror or error}).")
            return
        self.app.notify(f"{paths[0]}\n{paths[1]}", title="Transcript saved")
        self.dismiss(paths)
