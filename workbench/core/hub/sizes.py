"""Human-readable byte counts, rates and durations for hub listings and download progress."""

from __future__ import annotations


def size_text(n_bytes: int | None) -> str:
    """Decimal units as the hub shows them: 98.4 MB, 4.92 GB; 'unknown' when the hub gave none."""
    if n_bytes is None:
        return "unknown"
    if n_bytes >= 1e9:
        return f"{n_bytes / 1e9:.2f} GB"
    if n_bytes >= 1e6:
        return f"{n_bytes / 1e6:.1f} MB"
    if n_bytes >= 1e3:
        return f"{n_bytes / 1e3:.1f} kB"
    return f"{n_bytes} B"


def rate_text(bytes_per_s: float | None) -> str:
    return "measuring…" if bytes_per_s is None else f"{size_text(int(bytes_per_s))}/s"


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "ETA unknown"
    seconds = max(int(round(seconds)), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"ETA {hours}:{minutes:02d}:{secs:02d}" if hours else f"ETA {minutes}:{secs:02d}"
