"""What the KV-cache panel shows, as one frozen view, and the decode bound it implies."""

from __future__ import annotations

from dataclasses import dataclass, replace

from workbench.core.ledger.recurrent import layer_ranges
from workbench.core.ledger.types import Ledger
from workbench.core.units import size


@dataclass(frozen=True)
class KvView:
    """The context (`n_ctx` cells, `segments` as (state, n_tokens) in context order) and the ledger's sizes."""

    n_ctx: int = 0  # 0: no model loaded
    cells_used: int = 0
    segments: tuple[tuple[str, int], ...] = ()
    shift_notice: str = ""
    bytes_per_token: int = 0
    cache_types: str = "f16/f16"
    # A model with sliding-window layers keeps a second, smaller cache, described by the ledger's KVSplit.
    window_cells: int = 0  # cells of the window cache (0 = no window layers)
    window_layers: str = ""  # e.g. "5 of 6 layers keep the last 512 tokens"
    layers_note: str = ""  # a hybrid model: which layers keep this cache and which a recurrent state instead

    def with_ledger(self, ledger: Ledger | None) -> KvView:
        """The sizes of `ledger` (the loaded choice's while a model is loaded); None keeps the last ones."""
        if ledger is None:
            return self
        view = replace(self, layers_note=_layers_note(ledger))
        split = ledger.kv_split
        if split is None:
            return replace(view, bytes_per_token=ledger.kv_bytes_per_token, window_cells=0,
                           cache_types=f"K {ledger.cache_type_k} / V {ledger.cache_type_v}")
        # the grid is the global layers' cache; the window cache gets its own line
        full = ", full-size: swa_full" if split.swa_full else ""
        return replace(view, bytes_per_token=split.global_bytes // max(1, split.global_cells),
                       cache_types=f"K {ledger.cache_type_k} / V {ledger.cache_type_v}",
                       window_cells=split.swa_cells,
                       window_layers=(f"{split.swa_layers} of {split.swa_layers + split.global_layers} layers "
                                      f"keep the last {split.n_swa:,} tokens{full}"))

    def emptied(self) -> KvView:
        """No model in memory: no context to draw."""
        return replace(self, n_ctx=0, cells_used=0, segments=())


def _layers_note(ledger: Ledger) -> str:
    state = ledger.recurrent
    if state is None:
        return ""
    per_sequence = state.bytes_per_sequence
    return (f"attention layers {layer_ranges(state.attention_layers)} keep this cache; recurrent layers "
            f"{layer_ranges(state.recurrent_layers)} keep {size(per_sequence)} per sequence ({state.kind})")


def decode_bound_tps(ledger: Ledger | None, kv: KvView) -> float:
    """The bandwidth bound at the current context (time per token grows with the KV read); 0 when unknown."""
    if ledger is None or ledger.decode_tps_bound[0] <= 0:
        return 0.0
    empty, full = ledger.decode_tps_bound
    share = kv.cells_used / kv.n_ctx if kv.n_ctx else 0.0
    seconds_per_token = 1 / empty + (1 / full - 1 / empty) * share if full > 0 else 1 / empty
    return 1 / seconds_per_token
