"""The ledger per device: what each device holds against its budget, the context that fits, the best split."""

from __future__ import annotations

from collections.abc import Sequence

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.config.preset_split import effective_gpu_layers
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.ctx_search import largest_fitting_ctx
from workbench.core.ledger.decode_bound import decode_bound
from workbench.core.ledger.kv_layers import CTX_PAD
from workbench.core.ledger.placement import (
    compute_per_device,
    kv_per_device,
    layer_devices,
    placement_of,
    split_points,
    uses_pipeline,
    weights_per_device,
)
from workbench.core.ledger.predict import (
    TIGHT_HEADROOM,
    llama_n_ctx,
    predicted_overhead_bytes,
)
from workbench.core.ledger.split_rate import split_rate
from workbench.core.ledger.split_types import (
    CPU,
    UNKNOWN,
    DeviceLedger,
    SplitDevice,
    SplitLedger,
)
from workbench.core.ledger.types import DOES_NOT_FIT, FITS, TIGHT
from workbench.core.ledger.verdict_text import overrun_words
from workbench.core.units import mib


def _verdict(total: int, budget: int | None, name: str, lines: Sequence[tuple[str, int]]) -> tuple[str, str]:
    if budget is None:
        return UNKNOWN, f"{name}: no budget (give the node a device profile with --rpc host:port@profile)"
    headroom = budget - total
    if headroom < 0:
        return DOES_NOT_FIT, (f"does not fit {name}: " + overrun_words(
            [(label, n_bytes, "") for label, n_bytes in lines], total, budget, f"its {mib(budget)} budget"))
    if headroom < TIGHT_HEADROOM * budget:
        return TIGHT, f"tight on {name}: {mib(headroom)} headroom of {mib(budget)}"
    return FITS, f"fits {name} with {mib(headroom)} ({headroom / budget:.0%}) headroom"


def _device_ledgers(model: ModelInfo, preset: Preset, n_ctx: int, host_budget: int | None, host_source: str,
                    devices: Sequence[SplitDevice], placement: Sequence[int]) -> tuple[DeviceLedger, ...]:
    n = len(devices)
    weights = weights_per_device(model, preset, placement, devices)
    kv = kv_per_device(model, preset, n_ctx, placement, n)
    llama_devices = 1 if preset.split_mode == "none" else n  # split_mode none keeps only main_gpu
    compute = compute_per_device(model, preset, n_ctx, placement, n, pipeline=uses_pipeline(model, preset, llama_devices))
    overhead = predicted_overhead_bytes(model)
    # A local unified-memory GPU's buffers come out of the host's RAM: the host line carries them.
    shared = sum(weights[i + 1] + kv[i + 1] + compute[i + 1] for i, d in enumerate(devices) if d.shares_host_memory)
    out = []
    for index in range(-1, n):
        slot = index + 1
        device = devices[index] if index >= 0 else None
        name = device.name if device else CPU
        budget = host_budget if device is None else (None if device.shares_host_memory else device.budget_bytes)
        source = host_source if device is None else ("shares the host's RAM (unified memory)"
                                                     if device.shares_host_memory else device.budget_source)
        extra = overhead + shared if device is None else 0
        lines = [("the weights", weights[slot]), ("the KV cache", kv[slot]), ("the compute buffer", compute[slot])]
        if device is None:
            lines += [("the runtime overhead", overhead)] + ([("the unified GPU's buffers", shared)] if shared else [])
        total = weights[slot] + kv[slot] + compute[slot] + extra
        verdict, reason = _verdict(total, budget, name, lines)
        if device is not None and device.shares_host_memory:
            verdict, reason = FITS, f"{name}: counted in the host's budget (unified memory)"
        out.append(DeviceLedger(
            name=name, endpoint=device.endpoint if device else "",
            layers=tuple(il for il, where in enumerate(placement[:-1]) if where == index),
            holds_output=placement[-1] == index, weights_bytes=weights[slot], kv_bytes=kv[slot],
            compute_bytes=compute[slot], overhead_bytes=extra, budget_bytes=budget, budget_source=source,
            verdict=verdict, reason=reason,
        ))
    return tuple(out)


def _overall(ledgers: Sequence[DeviceLedger]) -> tuple[str, str]:
    for verdict in (DOES_NOT_FIT, TIGHT, UNKNOWN):
        broken = [ledger for ledger in ledgers if ledger.verdict == verdict]
        if broken:
            return verdict, "; ".join(ledger.reason for ledger in broken)
    return FITS, "fits every device"


def _max_ctx(model: ModelInfo, preset: Preset, host_budget: int | None, devices: Sequence[SplitDevice],
             placement: Sequence[int]) -> int:
    def fits(n_ctx: int) -> bool:
        ledgers = _device_ledgers(model, preset, n_ctx, host_budget, "", devices, placement)
        return all(ledger.verdict != DOES_NOT_FIT for ledger in ledgers)

    return largest_fitting_ctx(fits, (model.n_ctx_train or 1 << 20) // CTX_PAD)


def _best_split(model: ModelInfo, preset: Preset, n_ctx: int, devices: Sequence[SplitDevice],
                n_gpu_layers: int) -> tuple[int, ...]:
    """Layers per device (as a tensor_split) that leave each device the same share of its budget free.

    Greedy: the offloaded slots are handed out one at a time to the device that keeps the
    largest share of its budget after taking it. Given as whole layer counts, llama.cpp's
    rule reproduces exactly this placement (slot j goes to device k while j < c0 + ... + ck).
    """
    if not devices or any(d.budget_bytes is None or d.shares_host_memory for d in devices):
        return ()
    n_layer = model.n_layer
    act = min(n_layer + 1 if n_gpu_layers < 0 else n_gpu_layers, n_layer + 1)
    if act <= 0:
        return ()
    counts = [0] * len(devices)
    for _ in range(act):
        shares = []
        for index, device in enumerate(devices):
            trial = counts.copy()
            trial[index] += 1
            ledgers = _device_ledgers(model, preset, n_ctx, None, "", devices, placement_of(n_layer, act, trial))
            shares.append((device.budget_bytes - ledgers[index + 1].total_bytes) / device.budget_bytes)
        counts[max(range(len(devices)), key=lambda i: shares[i])] += 1
    return tuple(counts)


def predict_split(model: ModelInfo, preset: Preset, devices: Sequence[SplitDevice], *, host_budget_bytes: int | None,
                  host_budget_source: str = "host profile", host_bandwidth_bytes_per_s: float | None = None,
                  ctx_size: int | None = None, host_profile: DeviceProfile | None = None) -> SplitLedger:
    """The per-device ledger of `preset` with these devices (RPC nodes first, then local GPUs); with the
    host's profile also the speed model's predicted decode rate of the split."""
    n_ctx = llama_n_ctx(model, preset.ctx_size if ctx_size is None else ctx_size)
    n_gpu_layers = effective_gpu_layers(preset)
    chosen = list(devices)
    if preset.split_mode == "none" and chosen:
        chosen = [chosen[min(preset.main_gpu, len(chosen) - 1)]]
    splits, splits_source = split_points(chosen, preset)
    placement = layer_devices(model.n_layer, n_gpu_layers if chosen else 0, splits)
    if preset.split_mode == "none" and len(devices) > 1:
        # Map the one chosen device back to its index among all devices.
        index = devices.index(chosen[0])
        placement = tuple(index if where >= 0 else -1 for where in placement)
        chosen = list(devices)
    ledgers = _device_ledgers(model, preset, n_ctx, host_budget_bytes, host_budget_source, chosen, placement)
    verdict, reason = _overall(ledgers)
    empty = decode_bound(model, preset, ledgers, chosen, host_bandwidth_bytes_per_s, 0.0, placement)
    full = decode_bound(model, preset, ledgers, chosen, host_bandwidth_bytes_per_s, 1.0, placement)
    rates = (None, None) if host_profile is None else tuple(
        split_rate(model, preset, ledgers, chosen, host_profile, bound, position)
        for bound, position in ((empty, 0), (full, max(0, n_ctx - 1))))
    return SplitLedger(
        model=model.name, preset=preset.name, ctx_size=n_ctx, n_gpu_layers=n_gpu_layers, splits=splits,
        splits_source=splits_source, devices=ledgers, verdict=verdict, reason=reason,
        max_ctx=_max_ctx(model, preset, host_budget_bytes, chosen, placement),
        best_tensor_split=_best_split(model, preset, n_ctx, chosen, n_gpu_layers),
        decode_empty=empty, decode_full=full, rate_empty=rates[0], rate_full=rates[1],
    )
