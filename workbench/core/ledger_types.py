"""The memory ledger's result: predicted bytes per line against a device budget."""

from __future__ import annotations

from dataclasses import dataclass

FITS = "fits"
TIGHT = "tight"  # under 10% headroom
DOES_NOT_FIT = "does not fit"


@dataclass(frozen=True)
class Ledger:
    model: str
    preset: str
    device: str
    ctx_size: int
    cache_type_k: str
    cache_type_v: str
    ram_total_bytes: int
    reserves_bytes: tuple[tuple[str, int], ...]
    budget_bytes: int  # ram total minus reserves: what is left for the LLM
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    overhead_bytes: int
    total_bytes: int
    headroom_bytes: int  # budget minus total; negative when it does not fit
    verdict: str  # FITS, TIGHT or DOES_NOT_FIT
    reason: str  # one sentence; names the line that breaks it when it does not fit
    kv_bytes_per_token: int
    max_ctx_by_kv_type: tuple[tuple[str, int], ...]  # ("f16", 8192), ("q8_0", 15360), ...
    decode_tps_bound: tuple[float, float]  # (at empty context, at full context), 0 if no bandwidth known
