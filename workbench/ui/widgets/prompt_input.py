"""The prompt box: a one-line input with shell-like history on up and down."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input


class PromptInput(Input):
    """Up and down walk through earlier prompts; the draft being typed is kept while walking."""

    BINDINGS = [
        Binding("up", "history_previous", "Previous prompt", show=False),
        Binding("down", "history_next", "Next prompt", show=False),
    ]

    def __init__(self, **kwargs) -> None:
        # focus coming back (a tab, a dialog closing) must not select the draft: the next key would replace it
        super().__init__(select_on_focus=False, **kwargs)
        self.history: list[str] = []
        self._position: int | None = None  # index into history while walking; None = at the draft
        self._draft = ""

    def remember(self, text: str) -> None:
        if text.strip() and (not self.history or self.history[-1] != text):
            self.history.append(text)
        self._position = None
        self._draft = ""

    def restore(self, text: str) -> None:
        """Put a prompt back (after a cancel or a crash) with the cursor at its end, ready to send or extend."""
        self._show(text)

    def action_history_previous(self) -> None:
        if not self.history:
            return
        if self._position is None:
            self._draft = self.value
            self._position = len(self.history) - 1
        elif self._position > 0:
            self._position -= 1
        self._show(self.history[self._position])

    def action_history_next(self) -> None:
        if self._position is None:
            return
        if self._position < len(self.history) - 1:
            self._position += 1
            self._show(self.history[self._position])
        else:
            self._position = None
            self._show(self._draft)

    def _show(self, text: str) -> None:
        self.value = text
        self.cursor_position = len(text)
