"""A yes/no question before something the user cannot take back (overwrite, discard)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Static

from workbench.ui.screens.dialog_screen import DialogScreen


class ConfirmModal(DialogScreen[bool]):
    """Dismisses with True when the user confirms, False on Back or Esc (the safe default has focus)."""

    BINDINGS = [Binding("escape", "dismiss(False)", "Back")]

    def __init__(self, title: str, body: str, confirm_label: str, *, back_label: str = "Back") -> None:
        super().__init__()
        self.title_text, self.body, self.confirm_label, self.back_label = title, body, confirm_label, back_label

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog -danger"):
            yield Static(self.title_text, classes="dialog-title", markup=False)
            yield Static(self.body, classes="dialog-body", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.back_label, id="back", variant="primary")
                yield Button(self.confirm_label, id="confirm", variant="error")

    def on_mount(self) -> None:
        self.query_one("#back", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm")
