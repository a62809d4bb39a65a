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
    kv_split: "KVSplit | None" = None  # set when the model has sliding-window layers
    resident: "ResidentMemory | None" = None
    experts: "ExpertCounts | None" = None  # set for a mixture-of-experts model
    fixes: tuple["LedgerFix", ...] = ()  # cheapest first; empty when it fits
    verified_on: str = ""  # the llama.cpp build the compute and overhead lines were checked against
    unverified: str = ""  # why the installed llama.cpp build is not the verified one ("" when it is)
    speed: "SpeedPrediction | None" = None  # the speed model's prediction (ledger/speed.py)
    cpu_repack_bytes: int = 0  # the CPU backend's CPU_REPACK weight buffer (ledger/cpu_repack.py), in the total
    cpu_repack_source: str = ""  # which weights, on which CPU features, read from where
    cpu_repack_types: tuple[str, ...] = ()  # the weight types repacked, e.g. ("MXFP4",)
    rs_bytes: int = 0  # llama.cpp's recurrent state (RS buffer), f32, per sequence; 0 without recurrent layers
    n_seq: int = 1  # sequences the context holds (preset parallel): KV streams, window cells and RS cells
    recurrent: "RecurrentState | None" = None  # which layers are recurrent and their state (ledger/recurrent.py)


@dataclass(frozen=True)
class KVSplit:
    """The KV cache of a model with sliding-window layers: a window cache and a full-context one."""

    n_swa: int  # the window, tokens
    swa_layers: int
    global_layers: int
    swa_cells: int  # cells of the window cache (llama.cpp pads window + ubatch to 256)
    global_cells: int  # cells of the full-context cache
    swa_bytes: int
    global_bytes: int
    swa_full: bool  # the preset keeps the whole context in the window layers too
    source: str  # where the window and the layer pattern come from


@dataclass(frozen=True)
class ResidentMemory:
    """What the engine process's RSS is expected to show, with where each figure comes from."""

    after_load_bytes: int
    after_load_source: str
    after_prompt_bytes: int
    after_prompt_source: str


@dataclass(frozen=True)
class ExpertCounts:
    """A mixture-of-experts model's experts, from its GGUF header."""

    total: int  # experts per layer
    used: int  # experts each token is routed to
    shared: int  # experts every token uses (0 = none)
    expert_bytes: int  # all routed-expert weights (in memory)
    active_bytes_per_token: int  # weights one decoded token reads: all but the unused experts


@dataclass(frozen=True)
class LedgerFix:
    """One change to the preset that makes the ledger fit, what it saves and what it costs."""

    change: str  # e.g. "ctx_size 8192 -> 4096"
    preset_changes: tuple[tuple[str, object], ...]  # Preset fields to replace, e.g. (("ctx_size", 4096),)
    saved_bytes: int
    cost: str  # the known price, one sentence
    fits: bool  # this change alone makes it fit


@dataclass(frozen=True)
class SpeedPrediction:
    """Predicted decode and prefill rates for a preset's threads and backend, with their basis and error band."""

    decode_tps_empty: float | None  # None: no figure to predict it from (the basis says which)
    decode_tps_full: float | None  # at the preset's full context
    prefill_tps: float | None  # a 512-token prompt at empty context, as llama-bench's pp512
    ttft_ms: float | None  # time to the first token of a 512-token prompt
    basis: str  # what the figures rest on, with sources
    band: tuple[float, float]  # the true rate is expected within prediction x (low, high)
    method: str  # "measured" (device probe), "published" (cited runs), "bound" (bandwidth only)
    threads: int
    backend: str  # "CPU", "CUDA" or "Vulkan"
    correction: float | None = None  # measured/predicted from this device's bench history, applied
