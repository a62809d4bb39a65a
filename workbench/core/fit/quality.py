"""What a weight type and a KV cache type cost in quality: a published table, and the user's own measurements."""

from __future__ import annotations

import re
from dataclasses import dataclass

from workbench.core.errors import WorkbenchError

# Perplexity increase over the full-precision model, from llama.cpp's own quantizer: QUANT_OPTIONS in
# tools/quantize/quantize.cpp at 0c1e570 (the bundled build), "+N ppl @ Llama-3-8B" per type. F16 and
# BF16 are listed there as +0.0020 and -0.0050 ppl on Mistral-7B against F32: within noise, counted as 0.
QUALITY_SOURCE = "llama.cpp tools/quantize/quantize.cpp (0c1e570): perplexity increase on Llama-3-8B"
PUBLISHED_PPL: dict[str, float] = {
    "F32": 0.0, "F16": 0.0, "BF16": 0.0,
    "Q8_0": 0.0026, "Q6_K": 0.0217, "Q5_K_M": 0.0569, "Q5_K_S": 0.1049, "Q5_1": 0.1062, "Q5_0": 0.1316,
    "Q4_K_M": 0.1754, "Q4_K_S": 0.2689, "Q4_1": 0.4511, "Q4_0": 0.4685,
    "Q3_K_L": 0.5562, "Q3_K_M": 0.6569, "Q3_K_S": 1.6321, "Q2_K_S": 3.1836, "Q2_K": 3.5199,
}
# A quantized KV cache has no per-type figure in llama.cpp's tables. It is ranked like weights of the
# same block format (q8_0 like Q8_0, q4_0 like Q4_0): an ordering the search states, not a measurement.
KV_RANK_PPL: dict[str, float] = {"f16": 0.0, "bf16": 0.0, "f32": 0.0, "q8_0": PUBLISHED_PPL["Q8_0"],
                                 "q5_1": PUBLISHED_PPL["Q5_1"], "q5_0": PUBLISHED_PPL["Q5_0"],
                                 "q4_1": PUBLISHED_PPL["Q4_1"], "q4_0": PUBLISHED_PPL["Q4_0"]}
KV_RANK_SOURCE = "ranked like weights of the same block format (no published KV-cache figure)"

FLOORS = ("q2", "q3", "q4", "q5", "q6", "q8", "f16")


@dataclass(frozen=True)
class MeasuredQuality:
    """The user's own bench row for this model: perplexity increase of a weight type (and KV type)."""

    weights: str  # the weight type measured ("Q4_K_M")
    cache_type: str  # the KV cache type of that row ("f16")
    ppl_delta: float
    source: str  # "bench file NAME, row PRESET"


def type_bits(name: str) -> int:
    """The bits class of a weight or cache type: Q4_K_M -> 4, IQ3_XS -> 3, q8_0 -> 8, F16 -> 16."""
    upper = name.upper()
    if upper in ("F16", "BF16"):
        return 16
    if upper == "F32":
        return 32
    match = re.match(r"I?Q(\d)", upper) or re.match(r"TQ(\d)", upper) or re.match(r"MXFP(\d)", upper)
    return int(match.group(1)) if match else 0


def check_floor(floor: str | None) -> int:
    """--quality q4|q5|...: the least bits a weight or cache type may have (0 = no floor)."""
    if floor is None or floor == "":
        return 0
    if floor.lower() not in FLOORS:
        raise WorkbenchError(f"--quality {floor} is not a quality floor", fix=f"Use one of {', '.join(FLOORS)}")
    return type_bits(floor)


def weights_loss(weight_type: str, cache: str, measured: tuple[MeasuredQuality, ...]) -> tuple[float, str] | None:
    """(perplexity increase, where it comes from) of a weight type; None when nothing gives a figure."""
    for row in measured:
        if row.weights.upper() == weight_type.upper() and row.cache_type.lower() == cache.lower():
            return row.ppl_delta, row.source
    published = PUBLISHED_PPL.get(weight_type.upper())
    if published is None:
        return None
    return published, QUALITY_SOURCE


def cache_loss(cache: str) -> float:
    return KV_RANK_PPL.get(cache.lower(), KV_RANK_PPL["q4_0"])
