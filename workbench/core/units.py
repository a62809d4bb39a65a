"""How figures are written for a person: bytes (binary, and decimal as the hub shows them), rates, durations;
unavailable stays unavailable."""

from __future__ import annotations

UNAVAILABLE = "n/a"
MIB = 1 << 20  # bytes in a MiB, llama.cpp's unit in its buffer-size log lines


def mib(n_bytes: int | float | None) -> str:
    """Bytes as MiB (llama.cpp's own unit in its buffer-size log lines)."""
    if n_bytes is None:
        return UNAVAILABLE
    value = n_bytes / MIB
    if abs(value) >= 100:
        return f"{value:,.0f} MiB"
    return f"{value:,.1f} MiB"


def mib_number(n_bytes: int | float | None) -> str:
    """Bytes as a bare MiB figure for tables whose header names the unit; "—" when not known."""
    if n_bytes is None:
        return "—"
    value = n_bytes / MIB
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def sizes_that_differ(first: int, second: int) -> tuple[str, str]:
    """Two byte counts as error messages say them (where a file ends, what a tensor needs): exact bytes
    under a MiB, else MiB with as many decimals as it takes for different counts to read differently
    ("48.37 MiB" against "48.41 MiB", never "48 MiB" twice); exact bytes when MiB decimals cannot."""
    if first < MIB or second < MIB:
        return f"{first} bytes", f"{second} bytes"
    for decimals in range(4):
        texts = (f"{first / MIB:,.{decimals}f} MiB", f"{second / MIB:,.{decimals}f} MiB")
        if texts[0] != texts[1] or first == second:
            return texts
    return f"{first} bytes", f"{second} bytes"


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


def threads_text(count: int) -> str:
    return f"{count} thread" if count == 1 else f"{count} threads"


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "ETA unknown"
    seconds = max(int(round(seconds)), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"ETA {hours}:{minutes:02d}:{secs:02d}" if hours else f"ETA {minutes}:{secs:02d}"
