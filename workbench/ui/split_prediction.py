"""The main screen's per-device ledger: computed in the prediction worker when layers leave the CPU."""

from __future__ import annotations

from typing import Any

from workbench.core.rpc.nodes import predict_devices


def predict_split_or_none(model: Any, preset: Any, device: Any, rpc: tuple) -> Any:
    """The SplitLedger when the preset (or --rpc) places layers on devices, else None; errors become None.

    The nodes are probed without the link test (HELLO and memory only): this runs on every
    change of selection.
    """
    if not (rpc or preset.rpc or (preset.gpu_layers and device.accelerator != "none")):
        return None

    try:
        split, _reports = predict_devices(model, preset, device, rpc, measure_link=False)
    except Exception:  # noqa: BLE001 - the single-device ledger above still stands; the panel shows none
        return None
    return split
