"""How figures are written on screen: bytes, rates, durations; unavailable stays unavailable."""

from __future__ import annotations

UNAVAILABLE = "n/a"


def mib(n_bytes: int | float | None) -> str:
    """Bytes as MiB (llama.cpp's own unit in its buffer-size log lines)."""
    if n_bytes is None:
        return UNAVAILABLE
    value = n_bytes / 2**20
    if abs(value) >= 100:
        return f"{value:,.0f} MiB"
    return f"{value:,.1f} MiB"


def mib_number(n_bytes: int | float | None) -> str:
    """Bytes as a bare MiB figure for tables whose header names the unit; "—" when not known."""
    if n_bytes is None:
        return "—"
    value = n_bytes / 2**20
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def size(n_bytes: int | float | None) -> str:
    """Bytes in the largest unit that keeps the number readable."""
    if n_bytes is None:
        return UNAVAILABLE
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB"


def rate(tokens_per_second: float | None) -> str:
    if tokens_per_second is None or tokens_per_second <= 0:
        return UNAVAILABLE
    return f"{tokens_per_second:,.1f} tok/s"


def seconds(value: float | None) -> str:
    if value is None or value < 0:
        return UNAVAILABLE
    return f"{value * 1000:,.0f} ms" if value < 1 else f"{value:,.2f} s"


def celsius(value: float | None) -> str:
    return UNAVAILABLE if value is None else f"{value:.1f} °C"


def mhz(khz: int | None) -> str:
    return UNAVAILABLE if not khz else f"{khz / 1000:,.0f} MHz"
