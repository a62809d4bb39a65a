"""Serving panel: the API's requests in flight and queued, and each slot's TTFT, tok/s and KV cells."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from workbench.core.engine.sequence_events import SequencesStatus
from workbench.core.units import UNAVAILABLE, seconds


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
        # short headers and bare numbers: the table fits the 46 columns it has at 80x24
        for column in ("slot", "req", "phase", "TTFT", "tok/s", "KV cells"):
            table.add_column(column, no_wrap=True, justify="left" if column in ("slot", "req", "phase") else "right")
        for slot in status.slots:  # the KV panel beside draws each slot's cells as blocks
            tps = f"{slot.decode_tps:,.1f}" if slot.decode_tps else UNAVAILABLE
            table.add_row(str(slot.slot), "—" if slot.request_id is None else f"#{slot.request_id}", slot.phase,
                          seconds(slot.ttft_s), tps, f"{slot.kv_cells:,}/{status.slot_ctx:,}")
        return Group(head, summary, table)
