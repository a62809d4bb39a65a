"""The decode bound of a split model: each device's reads at its memory bandwidth, plus each hop to an RPC node."""

from __future__ import annotations

from collections.abc import Sequence

from workbench.core.config.preset import Preset
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.split_types import DecodeBound, DecodeTerm, DeviceLedger, SplitDevice


def decode_bound(model: ModelInfo, preset: Preset, ledgers: Sequence[DeviceLedger], devices: Sequence[SplitDevice],
            host_bandwidth: float | None, kv_fraction: float, placement: Sequence[int]) -> DecodeBound:
    """Per token: each device reads its weights (the embedding table only one row) and its KV; each hop
    to an RPC node sends one token's activations (n_embd f32) and brings them back, one round trip each."""
    terms, missing = [], []
    # The input embedding is read by get_rows: one row per token, not the table; unless the table
    # is also the output layer's weight (tied embeddings) on the CPU, which reads all of it.
    tied = not any(tensor.name == "output.weight" for tensor in model.tensors)
    embd_table = next((t.n_bytes for t in model.tensors if t.name == "token_embd.weight"), 0)
    skipped = 0 if tied and placement[-1] < 0 else embd_table
    for index, ledger in enumerate(ledgers):
        device = devices[index - 1] if index else None
        read = ledger.weights_bytes + ledger.kv_bytes * kv_fraction
        if device is None:
            read -= skipped
        bandwidth = host_bandwidth if device is None else device.bandwidth_bytes_per_s
        if not read:
            continue
        if not bandwidth:
            missing.append(f"{ledger.name} memory bandwidth")
            continue
        source = "host profile" if device is None else device.bandwidth_source
        terms.append(DecodeTerm(f"{ledger.name} memory", max(0, read) / bandwidth, source))
    # Hops: the activations leave the host for each run of layers on an RPC node and come back.
    runs, previous = [], -1
    for where in placement:
        if where != previous and where >= 0 and devices[where].endpoint:
            runs.append(where)
        previous = where
    for where in runs:
        device = devices[where]
        sent = model.n_embd * 4 * 2  # the token's hidden state there and back (f32)
        if placement[-1] == where:
            sent += model.n_vocab * 4  # the logits come back from the node holding the output
        if device.link_bytes_per_s:
            terms.append(DecodeTerm(f"link to {device.name}", sent / device.link_bytes_per_s, "node probe"))
        else:
            missing.append(f"link to {device.name} throughput (probe the node)")
        if device.link_latency_s is not None:
            terms.append(DecodeTerm(f"round trips to {device.name}", device.link_latency_s, "node probe"))
        else:
            missing.append(f"round trip to {device.name} (probe the node)")
    return DecodeBound(tuple(terms), tuple(missing))
