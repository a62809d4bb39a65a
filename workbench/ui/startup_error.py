"""What a browser session of `workbench serve` shows when the app cannot start: the error, not a splash screen
that never ends (the page only draws what the session's process writes)."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static


class StartupErrorApp(App):
    """One screen: why the workbench did not start and what to do; q quits (the page then says the session ended)."""

    CSS_PATH = "startup_error.tcss"
    TITLE = "Edge LLM Workbench: could not start"
    BINDINGS = [("q", "quit", "Quit")]

    def __init__(self, message: str, command: str) -> None:
        super().__init__()
        self._message = message
        self._command = command

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="startup-error"):
            yield Static("The workbench could not start", id="startup-error-title", markup=False)
            yield Static(self._message, id="startup-error-message", markup=False)
            yield Static(f"The server runs: {self._command}\nFix its arguments (or the file they name), restart "
                         "`workbench serve` and reload this page.", id="startup-error-fix", markup=False)
        yield Footer()
