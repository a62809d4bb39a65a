"""The speed model: predicted decode and prefill rates from the device's measured or published figures and the model's costs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from workbench.core.config.preset import DeviceProfile, Preset, ThreadRates
from workbench.core.config.presets import resolve_threads
from workbench.core.gguf.ggml_types import GGML_TYPES_BY_NAME
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.speed_costs import ModelCosts, model_costs
from workbench.core.ledger.types import SpeedPrediction
from workbench.core.units import MIB, threads_text

PROMPT_TOKENS = 512  # llama-bench's pp512: the prompt the prefill and TTFT figures are for
UBATCH = 512  # llama.cpp's default ubatch: the queries one graph attends with at once
KV_PAD = 256  # llama.cpp 0c1e570 pads the KV view a token attends over to this many cells
MEASURED_BAND = (0.85, 1.15)  # what benchmarks/speed_prediction.py holds the measured model to
# The share of the last-level cache a model's weights can count on keeping there from token to token: the
# cache also holds the KV, the activations and whatever else runs (in a VM, other tenants). Here (32 MiB
# L3) tiny models of 6 to 15 MB decoded at 0.68-1.14x the cached prediction (5 of 6 figures within 15%,
# at 1 and 2 threads); one of 19.5 MB at 1 thread near the memory prediction (1.12x it, 0.78x the cached
# one), at 2 threads at 1.0-1.5 ms a token between the two (0.76 ms from the cache, 2.0 ms from memory).
# Weights between this share and the whole cache are predicted from memory, the slower side; the cached
# rate is the band's high end.
CACHE_SHARE = 0.5
# Published figures come from models of 1-4 GB: a smaller model sits further below them (fixed
# costs per token: RK3588 runs are 2.2x off the bound at 3.8B, 3.5x at 0.6B), a larger one a bit above.
PUBLISHED_BAND = (0.4, 1.3)
# The bandwidth bound is an upper bound: published runs on Pi 5, RK3588 and Orin Nano sit 1.4-16x below it.
BOUND_BAND = (1 / 16, 1.0)


@dataclass(frozen=True)
class SpeedCorrection:
    """measured / predicted from this device's bench history, applied to later predictions."""

    decode_ratio: float | None
    prefill_ratio: float | None
    runs: int
    source: str  # the history file


@dataclass(frozen=True)
class SpeedModel:
    """One model on one device at one thread count and backend: rates at any context position."""

    costs: ModelCosts
    rates: ThreadRates | None  # probe-measured (method "measured")
    bandwidth_gbs: float  # method "published" or "bound": the read rate decode is sized by
    gflops: float | None  # method "published": prefill throughput; None = no source
    flash_attn: bool
    method: str
    decode_factor: float = 1.0  # the bench-history correction
    prefill_factor: float = 1.0
    kv_size: int = 0  # the KV cache's cells (the context padded as llama.cpp pads it); 0 = unknown
    mapped: bool = True  # the weights a view of the file (mmap), not memory llama.cpp allocated and read them into

    def decode_seconds(self, position: float, from_cache: bool | None = None) -> float | None:
        """Seconds for one decoded token with `position` tokens already in the context; `from_cache` True
        or False reads the weights and KV from the last-level cache or from memory, None as they fit it."""
        if self.rates is None:
            if self.bandwidth_gbs <= 0 or self.costs.decode_bytes_total <= 0:
                return None
            read = self.costs.decode_bytes_total + self.costs.kv_bytes(position)
            return read / (self.bandwidth_gbs * 1e9) / self.decode_factor
        rates = self.rates
        seconds = decode_token_seconds(self.costs, rates.token_us, rates.layer_us, rates.node_us)
        cached = cache_holds(rates.cache_mb, self.costs.decode_bytes_total) if from_cache is None else from_cache
        if not cached:
            # the cost per row was fitted on weights streamed from memory (device_probe._solve)
            seconds += self.costs.decode_rows * rates.row_ns / 1e9
        seconds += weights_read_seconds(rates, self.costs.decode_bytes, cached, mapped=self.mapped)
        # Attention computes over the cached K and V; once weights and cache outgrow the last-level
        # cache it also waits for the cache's bytes from memory.
        cells = attended_cells(position + 1, self.kv_size)
        if rates.attn_gflops:
            seconds += self.costs.attn_flops(cells) / (rates.attn_gflops * 1e9)
        kv_bytes = self.costs.kv_bytes(cells)
        kv_held = cache_holds(rates.cache_mb, self.costs.decode_bytes_total + kv_bytes)
        if rates.kv_read_gbs and not (kv_held if from_cache is None else from_cache):
            seconds += kv_bytes / (rates.kv_read_gbs * 1e9)
        return seconds / self.decode_factor

    def prefill_seconds(self, n_prompt: int, depth: int = 0) -> float | None:
        """Seconds to prefill `n_prompt` tokens after `depth` cached ones (one logits row at the end)."""
        # Without flash attention llama.cpp multiplies each query with every cell of the batch's
        # KV view and masks afterwards; the flash-attention kernel skips masked cells.
        mean_positions = depth + (n_prompt + 1) / 2 if self.flash_attn else depth + n_prompt
        total_flops = sum(n for _, n in self.costs.prefill_flops) * n_prompt
        if self.rates is None:
            if not self.gflops:
                return None
            total_flops += self.costs.attn_flops(mean_positions) * n_prompt
            return total_flops / (self.gflops * 1e9) / self.prefill_factor
        rates = self.rates
        seconds = n_prompt * prefill_token_seconds(self.costs, rates.prefill_token_us, rates.prefill_layer_us,
                                                   rates.prefill_element_ns)
        table = rates.prefill_gflops or rates.read_gbs
        seconds += sum(n * n_prompt / (type_rate(table, kind)[0] * 1e9) for kind, n in self.costs.prefill_flops)
        seconds += prefill_attention_seconds(self.costs, rates.prefill_attn_points, n_prompt, mean_positions)
        seconds += sum(n / (type_rate(rates.read_gbs, kind)[0] * 1e9) for kind, n in self.costs.output_bytes)
        return seconds / self.prefill_factor

    def decode_tps(self, position: float) -> float | None:
        seconds = self.decode_seconds(position)
        return 1 / seconds if seconds else None

    def prefill_tps(self, n_prompt: int, depth: int = 0) -> float | None:
        seconds = self.prefill_seconds(n_prompt, depth)
        return n_prompt / seconds if seconds else None


def cache_holds(cache_mb: float, n_bytes: float) -> bool:
    """Whether bytes read every token stay in a last-level cache of `cache_mb` between tokens (CACHE_SHARE of it)."""
    return n_bytes <= CACHE_SHARE * cache_mb * 1e6


def weights_read_seconds(rates: ThreadRates, reads: Sequence[tuple[str, int]], from_cache: bool | None = None, *,
                         mapped: bool = True) -> float:
    """Seconds to read these weight bytes (by type) once: weights the cache holds (cache_holds, or as
    `from_cache` says) are read from it, token after token. A probed cached rate below the memory rate is the
    probe's fixed costs, not the cache: never slower. Weights in memory llama.cpp allocated (`mapped` False)
    stream from memory at each type's rate times unmapped_scale, where the probe measured it."""
    held = cache_holds(rates.cache_mb, sum(n for _, n in reads)) if from_cache is None else from_cache
    cached = dict(rates.cached_read_gbs) if held else {}
    scale = 1.0 if mapped or held else unmapped_scale(rates) or 1.0
    return sum(n / (max(cached.get(kind, 0.0), type_rate(rates.read_gbs, kind)[0] * scale) * 1e9) for kind, n in reads)


def unmapped_scale(rates: ThreadRates) -> float | None:
    """The probe's Q8_0 read rate from llama.cpp's own memory over its rate from a mapped file; None unmeasured."""
    mapped = dict(rates.read_gbs).get("Q8_0")
    return rates.unmapped_read_gbs / mapped if rates.unmapped_read_gbs and mapped else None


def measured_band(speed: SpeedModel) -> tuple[tuple[float, float], str]:
    """MEASURED_BAND, widened by what the probe saw move between its passes at this thread count (decode with
    the highest cost per op and the lowest read rates sets the low end, the reverse the high end) and, for
    weights over the cache's share that the whole cache could hold, by them read from it (the high end)."""
    rates = speed.rates
    seconds = speed.decode_seconds(0) if rates is not None else None
    if rates is None or not seconds:
        return MEASURED_BAND, ""
    slow = fast = seconds
    widened = []
    if rates.node_us_range or rates.read_gbs_range or rates.cached_read_gbs_range:
        read, cached = type_rate(rates.read_gbs, "Q8_0")[0], dict(rates.cached_read_gbs).get("Q8_0", 0.0)
        node_range = rates.node_us_range or (rates.node_us, rates.node_us)
        read_range = rates.read_gbs_range or (read, read)
        cached_range = rates.cached_read_gbs_range or (cached, cached)

        def decode_seconds(end: int) -> float | None:
            """Decode with every figure at the slow (0) or fast (1) end of its range."""
            node_us = node_range[1 - end]
            scale, cached_scale = read_range[end] / read, (cached_range[end] / cached if cached else 1.0)
            moved = replace(rates, node_us=node_us, read_gbs=tuple((k, gbs * scale) for k, gbs in rates.read_gbs),
                            cached_read_gbs=tuple((k, gbs * cached_scale) for k, gbs in rates.cached_read_gbs),
                            unmapped_read_gbs=rates.unmapped_read_gbs * scale if rates.unmapped_read_gbs else None)
            return replace(speed, rates=moved).decode_seconds(0)

        slow, fast = decode_seconds(0) or seconds, decode_seconds(1) or seconds
        cached_text = (f", cached at {cached_range[0]:.1f}-{cached_range[1]:.1f} GB/s"
                       if rates.cached_read_gbs_range else "")
        widened.append(f"what moved between the probe's passes at {threads_text(rates.threads)}: {node_range[0]:.2f}-"
                       f"{node_range[1]:.2f} us per graph op, Q8_0 read at {read_range[0]:.1f}-{read_range[1]:.1f} "
                       f"GB/s{cached_text}")
    weights = speed.costs.decode_bytes_total
    if not cache_holds(rates.cache_mb, weights) and weights <= rates.cache_mb * 1e6:
        fast = min(fast, speed.decode_seconds(0, from_cache=True) or fast)
        widened.append(f"the weights, {weights / 1e6:.1f} MB, read from the {rates.cache_mb:.1f} MB last-level cache "
                       f"(predicted from memory: they fill over {CACHE_SHARE:.0%} of it)")
    if not widened:
        return MEASURED_BAND, ""
    band = (MEASURED_BAND[0] * min(1.0, seconds / slow), MEASURED_BAND[1] * max(1.0, seconds / fast))
    return band, f"; band x{MEASURED_BAND[0]:.2f}-x{MEASURED_BAND[1]:.2f} widened by " + " and by ".join(widened)


def attended_cells(used: float, kv_size: int = 0) -> float:
    """The cells a decoded token's attention computes over when `used` cells hold tokens: llama.cpp
    (llama_kv_cache::get_n_kv) pads the view to a multiple of KV_PAD, at least KV_PAD and at most the
    cache, and multiplies, masks and soft-maxes every cell of it."""
    cells = max(KV_PAD, math.ceil(used / KV_PAD) * KV_PAD)
    return min(cells, kv_size) if kv_size > 0 else cells


def kv_cache_size(n_ctx: int) -> int:
    """The cells of llama.cpp's KV cache for a context of `n_ctx` (padded to KV_PAD); 0 for 0."""
    return math.ceil(n_ctx / KV_PAD) * KV_PAD if n_ctx > 0 else 0


def layer_fixed_us(costs: ModelCosts, layer_us: float, node_us: float) -> float:
    """A layer's fixed decode cost: its share of the graph's ops where the probe measured a cost per op and
    the model's graph is known, else the probe's cost per layer."""
    if node_us and costs.graph_nodes and costs.n_layer:
        return costs.graph_nodes / costs.n_layer * node_us
    return layer_us


def decode_token_seconds(costs: ModelCosts, token_us: float, layer_us: float, node_us: float) -> float:
    """A decoded token's fixed cost: per token, plus its layers' (layer_fixed_us)."""
    return (token_us + costs.n_layer * layer_fixed_us(costs, layer_us, node_us)) / 1e6


def prefill_token_seconds(costs: ModelCosts, token_us: float, layer_us: float, element_ns: float) -> float:
    """A prompt token's fixed cost: per token, plus its elementwise work (per element where the probe measured
    that and the model's graph is known, else per layer)."""
    if element_ns and costs.prefill_elements:
        return token_us / 1e6 + costs.prefill_elements * element_ns / 1e9
    return (token_us + costs.n_layer * layer_us) / 1e6


def _interpolated(points: tuple[tuple[float, float], ...], x: float) -> float:
    """y at x on the (x, y) points (sorted by x), linear in log x between them, flat beyond them."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            return y0 + (y1 - y0) * math.log(x / x0) / math.log(x1 / x0)
    return points[-1][1]


def prefill_attention_seconds(costs: ModelCosts, points: tuple[tuple[float, float], ...], n_prompt: int,
                              positions: float) -> float:
    """A prompt's attention: per (head, query, cell), at the cost the probe measured for a layer's score
    matrix of that size (scores that outgrow the cache cost more per cell), scaled by the head dims."""
    if not points:
        return 0.0
    seconds = 0.0
    for window, n_layers in costs.attn_layers:
        cells = min(positions, window + n_prompt) if window else positions
        ns = _interpolated(points, costs.score_mb(min(n_prompt, UBATCH), cells))
        seconds += n_layers * costs.n_head * n_prompt * cells * ns * costs.head_dims / 128 / 1e9
    return seconds


def type_rate(table: tuple[tuple[str, float], ...], kind: str) -> tuple[float, str]:
    """The rate measured for `kind`, or for the measured type nearest in bits per weight (named)."""
    for name, rate in table:
        if name == kind:
            return rate, name
    bits = GGML_TYPES_BY_NAME[kind].bits_per_weight if kind in GGML_TYPES_BY_NAME else 8.0
    name, rate = min(table, key=lambda item: abs(GGML_TYPES_BY_NAME[item[0]].bits_per_weight - bits))
    return rate, name


def backend_of(preset: Preset, device: DeviceProfile) -> str:
    """Where the layers run: the profile's accelerator when the preset offloads any, else the CPU."""
    if device.accelerator != "none" and preset.gpu_layers not in (None, 0):
        return "CUDA" if device.accelerator == "cuda" else "Vulkan"
    return "CPU"


def _thread_rates(device: DeviceProfile, threads: int) -> tuple[ThreadRates | None, str]:
    if not device.thread_rates:
        return None, ""
    exact = [rates for rates in device.thread_rates if rates.threads == threads]
    if exact:
        return exact[0], ""
    below = [rates for rates in device.thread_rates if rates.threads < threads]
    chosen = below[-1] if below else device.thread_rates[0]
    return chosen, f" (measured at {threads_text(chosen.threads)}; the preset runs {threads})"


def device_threads(preset: Preset, device: DeviceProfile) -> int:
    """The preset's threads; 0 means this machine's rule (resolve_threads) for a measured or detected
    device, and for a profile of another board its fast cores (big.LITTLE) or its cores minus one."""
    if preset.threads > 0:
        return preset.threads
    if device.thread_rates or device.source == "detected":
        return resolve_threads(preset)
    return device.fast_cores or max(1, device.cores - 1)


def _threads_why(preset: Preset, device: DeviceProfile, threads: int) -> str:
    """Why threads = 0 came to this count on a profile of another board."""
    if preset.threads > 0 or device.thread_rates or device.source == "detected" or threads != device_threads(preset, device):
        return ""
    if device.fast_cores:
        return f" (threads = 0: the board's {device.fast_cores} fast cores of {device.cores}, fast_cores)"
    return f" (threads = 0: the board's {device.cores} cores minus one)"


def _note(device: DeviceProfile, key: str) -> str:
    return next((text for figure, text in device.notes if figure == key), "no source given")


def speed_model(model: ModelInfo, preset: Preset, device: DeviceProfile, *,
                threads: int | None = None, correction: SpeedCorrection | None = None) -> tuple[SpeedModel, str]:
    """The speed model for this model, preset and device, and the sentence saying what it rests on."""
    threads = threads or device_threads(preset, device)
    backend = backend_of(preset, device)
    costs = model_costs(model, preset.weights, preset.cache_type_k, preset.cache_type_v)
    read_mb = costs.decode_bytes_total / MIB
    rates, rates_note = _thread_rates(device, threads) if backend == "CPU" else (None, "")
    if rates is not None:
        method = "measured"
        read = ", ".join(f"{kind} {gbs:.1f}" for kind, gbs in rates.read_gbs)
        flops = ", ".join(f"{kind} {gflops:.0f}" for kind, gflops in rates.prefill_gflops)
        held = cache_holds(rates.cache_mb, costs.decode_bytes_total)
        rows = f"{costs.decode_rows:,} weight rows x {rates.row_ns:.2f} ns + " if rates.row_ns and not held else ""
        cached = ", ".join(f"{kind} {gbs:.1f}" for kind, gbs in rates.cached_read_gbs)
        where = (f"from the {rates.cache_mb:.1f} MB last-level cache (under {CACHE_SHARE:.0%} of it) at {cached} GB/s, "
                 f"other types " if held and cached else "")
        elementwise = (f" + {costs.prefill_elements:,} elementwise elements x {rates.prefill_element_ns:.3f} ns a token"
                       if rates.prefill_element_ns and costs.prefill_elements else "")
        fixed = (f"{costs.graph_nodes:,} graph ops x {rates.node_us:.2f} us" if rates.node_us and costs.graph_nodes
                 else f"{costs.n_layer} layers x {rates.layer_us:.1f} us")
        basis = (f"measured: {rates.token_us:.0f} us per token + {fixed} + "
                 f"{rows}{read_mb:.1f} MiB read {where}at {read} GB/s effective of "
                 f"{device.mem_bandwidth_gbs:g} GB/s{_unmapped_words(rates, held, preset.mmap)}; prefill "
                 f"compute-bound at {flops or 'unmeasured'} GFLOP/s{elementwise}; {threads_text(threads)}, {backend}{rates_note}; "
                 f"source: {_note(device, 'speed')}")
        bandwidth, gflops = 0.0, None
    elif device.effective_bandwidth_gbs and backend.lower() == device.effective_backend:
        method = "published"
        bandwidth, gflops = device.effective_bandwidth_gbs or 0.0, device.effective_gflops
        prefill = (f"prefill compute-bound at {gflops:g} GFLOP/s ({_note(device, 'effective_gflops')})" if gflops
                   else "prefill: unavailable (no published prefill throughput for this device)")
        basis = (f"memory-bound: {read_mb:.1f} MiB per token at {bandwidth:g} GB/s effective of "
                 f"{device.mem_bandwidth_gbs:g} GB/s ({_note(device, 'effective_bandwidth_gbs')}); {prefill}; "
                 f"no fixed per-token costs known: small models run slower; "
                 f"{threads_text(threads)}{_threads_why(preset, device, threads)}, {backend}")
    else:
        method = "bound"
        bandwidth, gflops = device.mem_bandwidth_gbs, None
        published = (f"; its published figures are for {device.effective_backend.upper()}, this preset runs "
                     f"{backend}" if device.effective_bandwidth_gbs else "")
        basis = (f"upper bound only: {read_mb:.1f} MiB per token at the {bandwidth:g} GB/s peak (no effective "
                 f"figures for {device.name} on {backend}{published}: run `workbench devices probe` on it); "
                 f"prefill: unavailable; {threads_text(threads)}{_threads_why(preset, device, threads)}, {backend}")
    if costs.expert_note:
        basis += f"; {costs.expert_note}"
    decode_factor = prefill_factor = 1.0
    if correction is not None:
        decode_factor = correction.decode_ratio or 1.0
        prefill_factor = correction.prefill_ratio or 1.0
        basis += (f"; corrected by this device's bench history ({correction.runs} runs, decode x{decode_factor:.2f}, "
                  f"prefill x{prefill_factor:.2f}, {correction.source})")
    return SpeedModel(costs=costs, rates=rates, bandwidth_gbs=bandwidth, gflops=gflops,
                      flash_attn=preset.flash_attn, method=method,
                      decode_factor=decode_factor, prefill_factor=prefill_factor,
                      kv_size=kv_cache_size(preset.ctx_size), mapped=preset.mmap), basis


def _unmapped_words(rates: ThreadRates, held: bool, mapped: bool) -> str:
    """What mmap off does to the weights' read rate, in the basis: nothing for a mapped file or one the cache holds."""
    if mapped or held:
        return ""
    scale = unmapped_scale(rates)
    if scale is None:
        return ("; mmap off: read into llama.cpp's own memory, whose read rate this profile lacks (the mapped "
                "rates stand in: `workbench devices probe` measures it)")
    return (f"; mmap off: read into llama.cpp's own memory, at {scale:.2f}x those rates (Q8_0 "
            f"{rates.unmapped_read_gbs:.1f} GB/s there, probed)")


def predict_speed(model: ModelInfo, preset: Preset, device: DeviceProfile, *, n_ctx: int,
                  threads: int | None = None, correction: SpeedCorrection | None = None) -> SpeedPrediction:
    """Decode at empty and full context, pp512 and the TTFT of a 512-token prompt, with basis and band."""
    threads = threads or device_threads(preset, device)
    speed, basis = speed_model(model, preset, device, threads=threads,
                               correction=correction)
    band, widened = measured_band(speed) if speed.method == "measured" else (
        PUBLISHED_BAND if speed.method == "published" else BOUND_BAND, "")
    prefill_seconds = speed.prefill_seconds(PROMPT_TOKENS)
    return SpeedPrediction(
        decode_tps_empty=speed.decode_tps(0),
        decode_tps_full=speed.decode_tps(max(0, n_ctx - 1)),
        prefill_tps=speed.prefill_tps(PROMPT_TOKENS),
        ttft_ms=prefill_seconds * 1000 if prefill_seconds else None,
        basis=basis + widened + f"; band x{band[0]:.2f}-x{band[1]:.2f}",
        band=band,
        method=speed.method,
        threads=threads,
        backend=backend_of(preset, device),
        correction=speed.decode_factor if correction is not None else None,
    )
