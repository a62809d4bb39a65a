"""The user device profile `workbench devices probe` writes: the host's budget and the measured [speed.tN] tables."""

from __future__ import annotations

import platform
from pathlib import Path

import tomli_w

from workbench.core.bench.device_probe import DeviceProbe
from workbench.core.config.preset import DeviceProfile, ThreadRates


def _rates_table(rates: ThreadRates) -> dict:
    table: dict = {"token_us": round(rates.token_us, 2), "layer_us": round(rates.layer_us, 3),
                   "node_us": round(rates.node_us, 4),
                   "row_ns": round(rates.row_ns, 4), "read_gbs": dict(rates.read_gbs)}
    for key in ("node_us_range", "read_gbs_range", "cached_read_gbs_range"):
        if getattr(rates, key):
            table[key] = [round(x, 4) for x in getattr(rates, key)]
    if rates.kv_read_gbs:
        table["kv_read_gbs"] = round(rates.kv_read_gbs, 3)
    if rates.unmapped_read_gbs:
        table["unmapped_read_gbs"] = round(rates.unmapped_read_gbs, 3)
    table.update({"prefill_token_us": round(rates.prefill_token_us, 3),
                  "prefill_layer_us": round(rates.prefill_layer_us, 3),
                  "prefill_element_ns": round(rates.prefill_element_ns, 5), "prefill_gflops": dict(rates.prefill_gflops)})
    if rates.attn_gflops:
        table["attn_gflops"] = round(rates.attn_gflops, 3)
    if rates.prefill_attn_points:
        table["prefill_attn_points"] = [list(point) for point in rates.prefill_attn_points]
    if rates.cached_read_gbs:
        table.update({"cached_read_gbs": dict(rates.cached_read_gbs), "cache_mb": round(rates.cache_mb, 3)})
    return table


def probed_profile(probe: DeviceProbe, host: DeviceProfile, name: str) -> dict:
    """The user device profile for this machine: the host's detected budget plus the measured rates, with sources."""
    notes = {figure: text for figure, text in host.notes}
    notes["speed"] = probe.method
    notes["accelerator"] = "the probe measures the CPU backend only"
    data: dict = {
        "name": name,
        "description": f"this machine ({platform.node()}), rates measured by `workbench devices probe` at "
                       f"{probe.measured_at}",
        "ram_total_mb": host.ram_total_mb,
        "mem_bandwidth_gbs": host.mem_bandwidth_gbs,
        "cores": host.cores,
        "accelerator": "none",
        "reserves_mb": dict(host.reserves_mb),
        "notes": {key: notes[key] for key in notes if key != "power_limit_w"},
        "speed": {f"t{rates.threads}": _rates_table(rates) for rates in probe.rates},
    }
    return data


def write_probed_profile(probe: DeviceProbe, host: DeviceProfile, name: str, folder: Path) -> Path:
    """Write the profile as `folder/name.toml` (replacing an older probe's) and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    temporary = path.with_suffix(".toml.tmp")
    header = "# Written by `workbench devices probe`; run it again to measure anew.\n"
    temporary.write_text(header + tomli_w.dumps(probed_profile(probe, host, name)), encoding="utf-8")
    temporary.replace(path)
    return path
