"""Asks before loading a preset the ledger says does not fit, naming what breaks and offering one-key fixes."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Static

from workbench.core.ledger.types import Ledger, LedgerFix
from workbench.core.units import mib
from workbench.ui.screens.dialog_screen import DialogScreen


def what_breaks(ledger: Ledger) -> str:
    """One sentence, one "over" figure, in MiB only (llama.cpp's unit), then what happens on the device.

    The ledger's own reason is not repeated: it states the same shortfall in other words and units.
    """
    over = ledger.total_bytes - ledger.budget_bytes
    return (f"Predicted {mib(ledger.total_bytes)} (weights {mib(ledger.weights_bytes)}, KV cache "
            f"{mib(ledger.kv_bytes)} at ctx {ledger.ctx_size:,}, compute {mib(ledger.compute_bytes)}, overhead "
            f"{mib(ledger.overhead_bytes)}) against the {mib(ledger.budget_bytes)} left for the LLM on "
            f"{ledger.device}: {mib(over)} over.\n\n"
            "On the device this ends in swapping (decode slows to a crawl) or the kernel's OOM killer ending "
            "the engine, not in an error message. Here the engine runs in its own process, so the app survives.")


MAX_FIXES = 4  # keys 1-4


def fix_line(key: int, fix: LedgerFix) -> str:
    verdict = "fits" if fix.fits else "not enough alone"
    return f"[{key}] {fix.change}: saves {mib(fix.saved_bytes)} ({verdict}); cost: {fix.cost}"


class OverbudgetModal(DialogScreen[object]):
    """Dismisses with True to load anyway (allow_overbudget), False to go back, or the LedgerFix to apply."""

    BINDINGS = [Binding("escape", "dismiss(False)", "Back")] + [
        Binding(str(key), f"apply_fix({key - 1})", f"Fix {key}", show=False) for key in range(1, MAX_FIXES + 1)]

    def __init__(self, ledger: Ledger) -> None:
        super().__init__()
        self.ledger = ledger

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog -danger"):
            yield Static(f"✘ {self.ledger.preset} does not fit {self.ledger.device}", classes="dialog-title")
            yield Static(what_breaks(self.ledger), classes="dialog-body", markup=False)
            fixes = self.ledger.fixes[:MAX_FIXES]
            if fixes:
                lines = [fix_line(index + 1, fix) for index, fix in enumerate(fixes)]
                yield Static("Press a number to apply a fix (an unsaved copy of the preset):\n" + "\n".join(lines),
                             id="fixes", classes="dialog-body", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Back", id="back", variant="primary")
                yield Button("Load anyway", id="load-anyway", variant="error")

    def on_mount(self) -> None:
        self.query_one("#back", Button).focus()

    def action_apply_fix(self, index: int) -> None:
        if index < len(self.ledger.fixes[:MAX_FIXES]):
            self.dismiss(self.ledger.fixes[index])

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "load-anyway")
