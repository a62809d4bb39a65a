"""The ledger's recurrent-state and sequence rows, and the layer map `inspect` prints, as text."""

from __future__ import annotations

from collections.abc import Callable

from workbench.core.ledger.recurrent import RS_TYPE, RecurrentState, layer_ranges
from workbench.core.units import MIB


def layer_map_text(state: RecurrentState) -> str:
    """Which layers attend (keep a KV cache) and which are recurrent, one line."""
    return (f"layers: attention (KV cache) {layer_ranges(state.attention_layers)}; recurrent ({state.kind}) "
            f"{layer_ranges(state.recurrent_layers)}")


def recurrent_rows(ledger, mb_text: Callable[[int], str]) -> list[tuple[str, str, str]]:
    """The ledger table's rows for the recurrent state and the sequences; none for one sequence and no state."""
    rows = []
    state = ledger.recurrent
    if state is not None:
        rows.append(("recurrent state", mb_text(ledger.rs_bytes),
                     f"{state.n_recurrent} layers x {ledger.n_seq} seq x {state.bytes_per_sequence // max(1, state.n_recurrent):,} B, "
                     f"{RS_TYPE} ({state.kind}); independent of ctx"))
        rows.append(("  attention layers", "", f"{layer_ranges(state.attention_layers)} (the KV cache's only layers)"))
    if ledger.n_seq > 1:
        rows.append(("  sequences", "", f"{ledger.n_seq} (parallel): one KV cache of ctx cells shared (kv_unified)"))
    return rows


def sequences_ledger_line(ledger) -> str:
    """One line of the ledger for the sequences it was predicted for (vote mode, api)."""
    rs = f", recurrent state {ledger.rs_bytes / MIB:,.2f} MiB" if ledger.recurrent is not None else ""
    return (f"ledger for {ledger.n_seq} sequence{'s' if ledger.n_seq > 1 else ''} ({ledger.preset}, ctx "
            f"{ledger.ctx_size:,}): KV {ledger.kv_bytes / MIB:,.1f} MiB{rs}, compute {ledger.compute_bytes / MIB:,.1f} MiB, "
            f"total {ledger.total_bytes / MIB:,.0f} MiB; {ledger.verdict}")
