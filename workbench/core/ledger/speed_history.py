"""Each device's bench history of measured/predicted speed, kept in the user state folder and read back as a correction."""

from __future__ import annotations

import json
import math
import statistics
from datetime import datetime, timezone
from pathlib import Path

from workbench.core import paths
from workbench.core.files.json_file import write_json_replacing
from workbench.core.ledger.speed import SpeedCorrection

HISTORY_FILE = "speed_history.json"
MAX_FILE_BYTES = 1 << 20  # a history larger than this is damaged or not ours: ignored
MAX_DEVICES = 256
KEPT_RUNS = 10  # the correction is the median of the last ten runs: one odd run moves it little
# A ratio outside this is not a correction but a broken measurement (or a file edited by hand).
MIN_RATIO, MAX_RATIO = 0.05, 20.0


def history_path() -> Path:
    return paths.state_dir() / HISTORY_FILE


def _ratios(value: object) -> list[float]:
    if not isinstance(value, list):
        return []
    return [float(x) for x in value[-KEPT_RUNS:]
            if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            and MIN_RATIO <= x <= MAX_RATIO]


def read_history(path: Path | None = None) -> dict[str, dict[str, list[float]]]:
    """device -> {"decode": ratios, "prefill": ratios}; a missing, oversized or malformed file (or entry) is left out."""
    path = path or history_path()
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    devices = data.get("devices") if isinstance(data, dict) else None
    if not isinstance(devices, dict):
        return {}
    history = {}
    for name, entry in list(devices.items())[:MAX_DEVICES]:
        if isinstance(name, str) and 0 < len(name) <= 200 and isinstance(entry, dict):
            history[name] = {"decode": _ratios(entry.get("decode")), "prefill": _ratios(entry.get("prefill"))}
    return history


def speed_correction(device: str, path: Path | None = None) -> SpeedCorrection | None:
    """The median measured/predicted of `device`'s last bench runs, or None when it has none."""
    path = path or history_path()
    entry = read_history(path).get(device)
    if not entry or not (entry["decode"] or entry["prefill"]):
        return None
    return SpeedCorrection(
        decode_ratio=statistics.median(entry["decode"]) if entry["decode"] else None,
        prefill_ratio=statistics.median(entry["prefill"]) if entry["prefill"] else None,
        runs=max(len(entry["decode"]), len(entry["prefill"])),
        source=str(path),
    )


def record_run(device: str, decode_ratio: float | None, prefill_ratio: float | None,
               path: Path | None = None) -> None:
    """Append one bench run's measured/predicted (against the uncorrected prediction) for `device`."""
    path = path or history_path()
    history = read_history(path)
    entry = history.setdefault(device, {"decode": [], "prefill": []})
    for key, ratio in (("decode", decode_ratio), ("prefill", prefill_ratio)):
        if ratio is not None and math.isfinite(ratio) and MIN_RATIO <= ratio <= MAX_RATIO:
            entry[key] = (entry[key] + [round(ratio, 4)])[-KEPT_RUNS:]
    if len(history) > MAX_DEVICES:
        history.pop(next(iter(history)))
    data = {"version": 1, "updated": datetime.now(timezone.utc).isoformat(timespec="seconds"), "devices": history}
    try:
        write_json_replacing(path, data, indent=1)
    except OSError:
        pass  # a read-only state folder only costs the correction
