"""What the fit search changed and why, what the next best candidates trade, and why nothing fits."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.fit.quality import KV_RANK_SOURCE, PUBLISHED_PPL
from workbench.core.fit.types import FitAlternative, FitCandidate, FitChange, FitRequest, WeightOption
from workbench.core.ledger.kv_layers import CTX_PAD
from workbench.core.ledger.predict import predict_ledger, predicted_weights_bytes
from workbench.core.ledger.weights import requantized_weights_bytes
from workbench.core.units import mib

SMALLER_TYPES = ("Q4_K_M", "Q3_K_M", "Q2_K")  # what a re-quantization outside a repository's files would give

_KEYS = ("weights", "ctx_size", "cache_type_k", "cache_type_v", "flash_attn", "ubatch_size", "swa_full",
         "gpu_layers", "n_cpu_moe", "tensor_split", "rpc")


def _sibling(ranked: Sequence[FitCandidate], chosen: FitCandidate, key: str, value: object) -> FitCandidate | None:
    """The candidate that differs from the choice only in `key` (set to `value`), if it fits."""
    want = dataclasses.replace(chosen.preset, **{key: value})
    for candidate in ranked:
        if candidate.option == chosen.option and dataclasses.replace(candidate.preset, ctx_size=want.ctx_size,
                                                                     name=want.name, description=want.description) == want:
            return candidate
    return None


def _grows(ranked: Sequence[FitCandidate], chosen: FitCandidate, key: str, value: object, request: FitRequest) -> str:
    other = _sibling(ranked, chosen, key, value)
    if other is None:
        return f"without it the context does not reach --ctx-min {request.ctx_min:,}"
    return f"the context grows from {other.ctx:,} to {chosen.ctx:,} tokens"


def changes_from(base: Preset, chosen: FitCandidate, ranked: Sequence[FitCandidate], request: FitRequest
                 ) -> tuple[FitChange, ...]:
    preset, option = chosen.preset, chosen.option
    out = []
    for key in _KEYS:
        old, new = getattr(base, key), getattr(preset, key)
        if old == new or (key == "cache_type_v" and preset.cache_type_v == preset.cache_type_k):
            continue
        if key == "weights":
            why = (f"{option.source}: {option.weight_type} loses +{chosen.quality_loss:.4f} ppl "
                   f"({chosen.quality_source}), the least of the types that fit")
        elif key == "ctx_size":
            why = f"the largest context that fits the budget (in steps of {CTX_PAD}; --ctx-min {request.ctx_min:,})"
        elif key == "cache_type_k":
            why = (f"a {new} K/V cache holds {chosen.ledger.kv_bytes_per_token:,} B per token; "
                   f"{_grows(ranked, chosen, 'cache_type_k', old, request)}; quality {KV_RANK_SOURCE}")
            new = f"{new} (K and V)"
        elif key == "flash_attn":
            why = ("a quantized V cache only loads with flash attention" if preset.cache_type_v != "f16" else
                   f"flash attention needs no KQ matrix in the compute buffer: {_grows(ranked, chosen, key, old, request)}")
        elif key == "ubatch_size":
            why = f"a smaller compute buffer: {_grows(ranked, chosen, key, old, request)}; prompts are processed slower"
        elif key == "swa_full":
            why = "the window layers keep only the window: a cached prompt is reused only within it"
        elif key == "gpu_layers" and chosen.split is not None:
            held = [d.name for d in chosen.split.devices[1:] if d.layers or d.holds_output]
            count = "every layer and the output layer" if new == -1 else f"the last {new} layers"
            count += f" (the experts of layers < {preset.n_cpu_moe} in host memory)" if preset.n_cpu_moe else ""
            why = (f"{count} on {', '.join(held) or 'the devices'}: the most their budgets hold at --ctx-min "
                   f"{request.ctx_min:,} (llama.cpp offloads the last layers first); {chosen.split.reason}")
        elif key == "n_cpu_moe":
            layers = "layer 0" if new == 1 else f"the first {new} layers"
            why = (f"{chosen.option.model.n_layer} layers do not all fit the GPU whole: the routed experts of "
                   f"{layers} (the fewest that let every layer fit at --ctx-min {request.ctx_min:,}) stay in "
                   "host memory (llama-server --n-cpu-moe), which keeps the attention and shared weights on the GPU, "
                   "as llama.cpp's --fit moves MoE experts first, instead of moving whole layers off it")
        elif key == "rpc":
            why = "the --rpc nodes the layers go to (llama-server --rpc)"
        else:
            why = chosen.split.reason if chosen.split is not None else "the split the devices allow"
        out.append(FitChange(key, old, new, why))
    return tuple(out)


def trades(chosen: FitCandidate, other: FitCandidate) -> str:
    parts = []
    if other.ctx != chosen.ctx:
        parts.append(f"context {chosen.ctx:,} -> {other.ctx:,}")
    if other.option.weight_type != chosen.option.weight_type or other.preset.cache_type_k != chosen.preset.cache_type_k:
        parts.append(f"{other.option.weight_type} weights, {other.preset.cache_type_k} KV: "
                     f"{other.quality_loss - chosen.quality_loss:+.4f} ppl")
    if other.decode_tps and chosen.decode_tps and abs(other.decode_tps - chosen.decode_tps) >= 0.05:
        parts.append(f"decode {chosen.decode_tps:,.1f} -> {other.decode_tps:,.1f} tok/s")
    for key in ("flash_attn", "ubatch_size", "swa_full", "gpu_layers", "n_cpu_moe"):
        if getattr(other.preset, key) != getattr(chosen.preset, key):
            parts.append(f"{key} {getattr(other.preset, key)}")
    return "; ".join(parts) or "the same figures"


def alternatives(chosen: FitCandidate, ranked: Sequence[FitCandidate], limit: int = 3) -> tuple[FitAlternative, ...]:
    """The next best by each trade: the most context, the fastest, then the next in the ranking with another
    weight or cache type."""
    rest = [c for c in ranked[1:] if (c.option, c.preset.cache_type_k, c.ctx) != (chosen.option, chosen.preset.cache_type_k, chosen.ctx)]
    picks: list[FitCandidate] = []
    if rest:
        longest = max(rest, key=lambda c: (c.ctx, -c.quality_loss))
        if longest.ctx > chosen.ctx:
            picks.append(longest)
        fastest = max(rest, key=lambda c: (c.decode_tps or 0.0, c.ctx))
        if (fastest.decode_tps or 0.0) > (chosen.decode_tps or 0.0) and fastest not in picks:
            picks.append(fastest)
    seen = {(c.option.weight_type, c.preset.cache_type_k) for c in picks + [chosen]}
    for candidate in rest:
        if len(picks) >= limit:
            break
        if (candidate.option.weight_type, candidate.preset.cache_type_k) not in seen:
            seen.add((candidate.option.weight_type, candidate.preset.cache_type_k))
            picks.append(candidate)
    return tuple(FitAlternative(c, trades(chosen, c)) for c in picks[:limit])


def nothing_fits(options: Sequence[WeightOption], ranked: Sequence[WeightOption], device: DeviceProfile,
                 request: FitRequest, found: Sequence[FitCandidate]) -> str:
    """Why no candidate qualifies, and the smallest change outside the search that would make one."""
    if not options:
        return "no weight option to choose from (the repository has no GGUF file small enough for the budget)"
    if not ranked:
        types = ", ".join(sorted({o.weight_type for o in options}))
        floor = f" of at least {request.quality}" if request.quality else ""
        return (f"no weight type{floor} with a published or measured quality figure among {types} (a "
                f"re-quantization cannot add precision): a file of a higher-precision type, or a lower --quality")
    options = ranked
    if found:  # they fit, but none is fast enough
        best = max(found, key=lambda c: c.decode_tps or 0.0)
        rate = f"{best.decode_tps:,.1f} tok/s" if best.decode_tps else "unavailable"
        return (f"nothing meets --min-tps {request.min_tps:g}: the fastest that fits ({best.option.weight_type}, "
                f"ctx {best.ctx:,}) decodes at {rate} ({best.speed_source}); a smaller weight type or a faster device")
    trained = min(o.model.n_ctx_train for o in options)
    if 0 < trained < request.ctx_min:
        return (f"--ctx-min {request.ctx_min:,} is more than the model was trained for ({trained:,} tokens): "
                f"llama.cpp would run it past its trained context; ask for at most {trained:,}")
    smallest = min(options, key=lambda o: predicted_weights_bytes(o.model, o.weights))
    floor_preset = dataclasses.replace(request.base, weights=smallest.weights, ctx_size=max(request.ctx_min, CTX_PAD),
                                       cache_type_k="q8_0", cache_type_v="q8_0", flash_attn=True, swa_full=False,
                                       gpu_layers=None, rpc=())
    ledger = predict_ledger(smallest.model, floor_preset, device)
    over = ledger.total_bytes - ledger.budget_bytes
    if over <= 0:
        return (f"nothing fits {device.name} within the asked quality (--quality {request.quality}) and "
                f"--ctx-min {request.ctx_min:,}: a q8_0 cache would fit; lower the floor or the context")
    ways = [f"a device profile with at least {mib(ledger.total_bytes)} left for the LLM",
            f"a second board holding at least {mib(max(over, 0))} (--rpc host:port@profile)"]
    for kind in SMALLER_TYPES:
        smaller = ledger.total_bytes - ledger.weights_bytes + requantized_weights_bytes(smallest.model, kind)
        if type_bits_below(kind, smallest.weight_type) and smaller < ledger.total_bytes:
            ways.insert(0, f"a smaller weight type than the choices here: {kind} would need {mib(smaller)} "
                           f"({'fits' if smaller <= ledger.budget_bytes else 'still over'})")
            break
    return (f"nothing fits {device.name}: the smallest choice ({smallest.weight_type}, q8_0 KV, ctx "
            f"{floor_preset.ctx_size:,}) needs {mib(ledger.total_bytes)}, {mib(over)} over the "
            f"{mib(ledger.budget_bytes)} budget; outside the search: " + "; or ".join(ways))


def type_bits_below(kind: str, than: str) -> bool:
    """Whether `kind` is a smaller (lossier) type than `than` in the published table."""
    return PUBLISHED_PPL.get(kind, 0) > PUBLISHED_PPL.get(than.upper(), 0)
