"""A bench row's per-device figures when the preset splits the model: predicted and reported bytes, the bound."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.core.gguf.reader import read_gguf
from workbench.core.rpc.nodes import predict_devices


@dataclass(frozen=True)
class DeviceBench:
    """One device of a split row: what the ledger predicted and what llama.cpp reported (bytes)."""

    name: str  # "CPU", "RPC0", ...
    endpoint: str | None  # "host:port" of an RPC node
    predicted: int
    reported: int | None  # None when llama.cpp printed no buffer line for the device


def split_row_fields(config: Any, preset: Any, loaded: Any, notes: dict[str, str]) -> dict[str, Any]:
    """`devices`, `split_bound_tps` and `network_ms_per_token` of a row; `notes` gets why a figure is missing."""
    if not (preset.rpc or getattr(config, "rpc", ())):
        notes["split_bound_tps"] = notes["network_ms_per_token"] = "not split over devices (no RPC nodes)"
        return {}

    split, _reports = predict_devices(read_gguf(config.model_path), preset, config.device, getattr(config, "rpc", ()))
    # llama.cpp's model, KV and compute buffers: the lines the ledger predicts per device
    reported = ({(d.name, d.endpoint): d.model_bytes + d.kv_bytes + d.compute_bytes for d in loaded.devices}
                if loaded is not None else {})
    devices = tuple(
        DeviceBench(d.name, d.endpoint or None, d.weights_bytes + d.kv_bytes + d.compute_bytes,
                    reported.get((d.name, d.endpoint)))
        for d in split.devices
    )
    bound = split.decode_empty
    if bound.tokens_per_s is None:
        notes["split_bound_tps"] = "unknown: " + ", ".join(bound.missing)
    if not bound.terms:
        notes["network_ms_per_token"] = "unknown: no figure of the split's bound is known"
    return {
        "devices": devices,
        "split_bound_tps": bound.tokens_per_s,
        "network_ms_per_token": bound.network_seconds * 1000 if bound.terms else None,
    }
