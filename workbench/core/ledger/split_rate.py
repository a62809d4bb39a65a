"""The predicted decode rate of a split: each device's share of the speed model's cost per token, then the link."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.speed import (
    attended_cells,
    cache_holds,
    device_threads,
    layer_fixed_us,
    speed_model,
    unmapped_scale,
    weights_read_seconds,
)
from workbench.core.ledger.speed_costs import ModelCosts, decode_bytes_by_layer, decode_rows_by_layer
from workbench.core.ledger.split_types import (
    DecodeBound,
    DecodeTerm,
    DeviceLedger,
    SplitDevice,
    SplitRate,
)
from workbench.core.units import threads_text

# Per token and node, llama.cpp's RPC client sends about 6 SET_TENSOR (inputs, positions, mask),
# one GRAPH_RECOMPUTE and one GET_TENSOR (the count a node's checks, rpc.node_proxy, saw on the
# bundled model); only GET_TENSOR waits for an answer (node_guard.ANSWER_SIZES), so one round trip a hop.
RPC_COMMANDS_PER_TOKEN = "about 6 SET_TENSOR + 1 GRAPH_RECOMPUTE + 1 GET_TENSOR a token, one of them answered"


def _device_term(model: ModelInfo, preset: Preset, costs: ModelCosts, by_layer: dict[int, dict[str, int]],
                 rows_by_layer: dict[int, int], ledger: DeviceLedger, profile: DeviceProfile, is_host: bool,
                 position: float) -> tuple[float | None, str]:
    """Seconds this device spends on one token (None: no speed figures), and the words for its basis: the
    speed model's terms (SpeedModel.decode_seconds) for the layers it holds."""
    threads = device_threads(preset, profile)
    speed, _ = speed_model(model, dataclasses.replace(preset, gpu_layers=0), profile, threads=threads)
    reads: dict[str, int] = {}
    keys = list(ledger.layers) + ([-1] if ledger.holds_output else []) + ([-2] if is_host else [])
    for key in keys:
        for kind, n in by_layer.get(key, {}).items():
            reads[kind] = reads.get(kind, 0) + n
    total = sum(reads.values())
    share = len(ledger.layers) / max(1, costs.n_layer)
    cells = attended_cells(position + 1, speed.kv_size)
    kv = costs.kv_bytes(cells) * share
    held = f"{len(ledger.layers)} layers{' + output' if ledger.holds_output else ''}, {total / 1e6:.1f} MB read"
    rates = speed.rates
    if rates is not None:
        runs_graph = is_host or ledger.layers or ledger.holds_output
        layer_us = layer_fixed_us(costs, rates.layer_us, rates.node_us)
        seconds = ((rates.token_us if runs_graph else 0.0) + len(ledger.layers) * layer_us) / 1e6
        streamed = not cache_holds(rates.cache_mb, total)
        if streamed:  # as the speed model charges rows streamed from memory
            seconds += sum(rows_by_layer.get(key, 0) for key in keys) * rates.row_ns / 1e9
        # An RPC node holds its layers in buffers it allocated; the host's are a view of the file with mmap.
        mapped = is_host and preset.mmap
        seconds += weights_read_seconds(rates, tuple(reads.items()), mapped=mapped)
        scale = unmapped_scale(rates) if streamed and not mapped else None
        own_memory = f", weights in its own memory at {scale:.2f}x the mapped read rate" if scale else ""
        if rates.attn_gflops:
            seconds += costs.attn_flops(cells) * share / (rates.attn_gflops * 1e9)
        if rates.kv_read_gbs and not cache_holds(rates.cache_mb, total + kv):
            seconds += kv / (rates.kv_read_gbs * 1e9)
        return seconds, (f"{held}; {rates.token_us if runs_graph else 0:.0f} us fixed + {layer_us:.1f} us a layer, "
                         f"measured rates of {profile.name} at {threads_text(rates.threads)}{own_memory}")
    if speed.method == "published":
        return (total + kv) / (speed.bandwidth_gbs * 1e9), (
            f"{held} at {speed.bandwidth_gbs:g} GB/s effective ({profile.name}, published; no fixed costs known)")
    return None, f"{held}; no measured or published speed figures for {profile.name}"


def split_rate(model: ModelInfo, preset: Preset, ledgers: Sequence[DeviceLedger], devices: Sequence[SplitDevice],
               host: DeviceProfile, bound: DecodeBound, position: float) -> SplitRate:
    """Each device's share of the per-token cost at its own figures (a local RPC node runs llama.cpp's CPU
    backend at the host's; a remote node at its profile's), plus the bound's link and round-trip terms."""
    costs = speed_model(model, dataclasses.replace(preset, gpu_layers=0), host, threads=device_threads(preset, host))[0].costs
    by_layer = decode_bytes_by_layer(model, preset.weights, preset.n_cpu_moe)
    rows_by_layer = decode_rows_by_layer(model, preset.weights, preset.n_cpu_moe)
    terms, missing, words = [], [], []
    for index, ledger in enumerate(ledgers):
        device = devices[index - 1] if index else None
        if device is not None and not (ledger.layers or ledger.holds_output):
            continue
        profile = host if device is None else device.speed_profile
        source = "host profile" if device is None else device.speed_source
        if profile is None:
            missing.append(f"{ledger.name} speed figures (give the node a profile: --rpc host:port@profile)")
            continue
        seconds, said = _device_term(model, preset, costs, by_layer, rows_by_layer, ledger, profile, device is None,
                                     position)
        words.append(f"{ledger.name}: {said}")
        if seconds is None:
            missing.append(f"{ledger.name} speed figures ({profile.name} has none: run `workbench devices probe` there)")
        else:
            terms.append(DecodeTerm(f"{ledger.name} compute and reads", seconds, source))
    link = [term for term in bound.terms if term.what.startswith(("link", "round trips"))]
    terms.extend(link)
    missing.extend(item for item in bound.missing if item.startswith(("link", "round trip")))
    if any(d.endpoint for d in devices):
        words.append(f"link: activations over the probed link and one round trip a hop ({RPC_COMMANDS_PER_TOKEN}); "
                     "the per-command cost of the other RPC commands is not measured and not included")
    return SplitRate(tuple(terms), tuple(missing), "; ".join(words))
