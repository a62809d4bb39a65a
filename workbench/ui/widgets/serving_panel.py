"""Serving panel: the API's requests in flight and queued, and each slot's TTFT, tok/s and KV cells."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from workbench.core.engine.sequence_events import SequencesStatus
from workbench.ui.units import rate, seconds
from workbench.ui.widgets.colours import theme_colour

BAR_WIDTH = 20  # a slot's KV bar: its cells out of the slot's share of the context


class ServingPanel(Widget):
    """The screen sets `address`, `state` and `status` (the engine's latest SequencesStatus)."""

    BORDER_TITLE = "Serving"

    address: reactive[str] = reactive("")
    state: reactive[str] = reactive("off")
    status: reactive[SequencesStatus | None] = reactive(None)

    def render(self) -> RenderableType:
        if self.state == "off" or not self.address:
            return Text(f"not serving ({self.state})" if self.state not in ("off", "") else "not serving", style="dim")
        status = self.status
        head = Text(f"{self.address} — {self.state}", style="bold")
        if status is None:
            return Group(head, Text("no status from the engine yet", style="dim"))
        busy = sum(1 for slot in status.slots if slot.request_id is not None)
        summary = Text(f"in flight {busy} of {len(status.slots)} slots · queued {status.waiting} · "
                       f"KV {status.kv_cells_used:,} of {status.n_ctx:,} cells · "
                       f"batch {status.last_batch_sequences} seq (max {status.max_batch_sequences}) · "
                       f"tokens in {status.tokens_in:,} out {status.tokens_out:,}")
        table = Table(box=None, expand=True, pad_edge=False)
        for column in ("slot", "request", "phase", "TTFT", "decode", "KV cells"):
            table.add_column(column, no_wrap=True)
        used_colour = theme_colour(self.app, "kv-current")
        free_colour = theme_colour(self.app, "kv-free")
        for slot in status.slots:
            filled = round(BAR_WIDTH * min(1.0, slot.kv_cells / status.slot_ctx)) if status.slot_ctx else 0
            bar = Text.assemble(("█" * filled, used_colour), ("█" * (BAR_WIDTH - filled), free_colour),
                                f" {slot.kv_cells:,}/{status.slot_ctx:,}")
            table.add_row(str(slot.slot), "—" if slot.request_id is None else f"#{slot.request_id}", slot.phase,
                          seconds(slot.ttft_s), rate(slot.decode_tps), bar)
        return Group(head, summary, table)
