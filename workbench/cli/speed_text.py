"""The speed model's prediction as text and JSON: the same figures for `ledger`, `files --preview` and `bench`."""

from __future__ import annotations

from workbench.core.config.preset import ThreadRates
from workbench.core.ledger.types import SpeedPrediction
from workbench.core.units import threads_text

UNAVAILABLE = "unavailable"


def _rate(value: float | None, unit: str = "tok/s") -> str:
    return f"{value:,.1f} {unit}" if value else UNAVAILABLE


def speed_line(speed: SpeedPrediction) -> str:
    """One line: decode at empty and full context, pp512 and its TTFT, the band."""
    prefill = (f"prefill {_rate(speed.prefill_tps)} for a 512-token prompt, first token after "
               f"{speed.ttft_ms:,.0f} ms" if speed.prefill_tps and speed.ttft_ms else "prefill unavailable")
    return (f"predicted ({speed.method}, {threads_text(speed.threads)}, {speed.backend}): decode "
            f"{_rate(speed.decode_tps_empty)} at empty context, {_rate(speed.decode_tps_full)} at full context; "
            f"{prefill}; band x{speed.band[0]:.2f}-x{speed.band[1]:.2f}")


def rates_line(rates: ThreadRates) -> str:
    """A thread count's measured decode figures, and how far the probe's passes moved them."""
    fixed = f"{rates.node_us:.2f} us/graph op" if rates.node_us else f"{rates.layer_us:.1f} us/layer"
    rows = f" + {rates.row_ns:.2f} ns/weight row" if rates.row_ns else ""
    read = ", ".join(f"{kind} {gbs:.1f}" for kind, gbs in rates.read_gbs)
    if rates.unmapped_read_gbs:
        read += f" (Q8_0 {rates.unmapped_read_gbs:.1f} from llama.cpp's own memory: mmap off, RPC nodes)"
    moved = [f"{label}{span[0]:{digits}}-{span[1]:{digits}}{unit}" for label, span, digits, unit in (
        ("", rates.node_us_range, ".2f", " us/graph op"), ("Q8_0 read ", rates.read_gbs_range, ".1f", " GB/s"),
        ("cached ", rates.cached_read_gbs_range, ".1f", " GB/s")) if span]
    return (f"decode {rates.token_us:.0f} us/token + {fixed}{rows}, read GB/s {read}"
            + (f" (between the probe's passes: {', '.join(moved)})" if moved else ""))


def short_speed(speed: SpeedPrediction | None) -> str:
    """Decode and prefill in a table cell: "117 / 215" (tok/s), "-" where unavailable."""
    if speed is None:
        return "-"
    decode = f"{speed.decode_tps_empty:,.0f}" if speed.decode_tps_empty else "-"
    prefill = f"{speed.prefill_tps:,.0f}" if speed.prefill_tps else "-"
    return f"{decode} / {prefill}"


def _rounded(value: float | None) -> float | None:
    return round(value, 2) if value else None  # unavailable is null, never 0


def speed_json(speed: SpeedPrediction | None) -> dict:
    """The four keys of `ledger --json`: predicted_decode_tps, predicted_prefill_tps, predicted_ttft_ms, speed_basis."""
    if speed is None:
        return {"predicted_decode_tps": {"empty_context": None, "full_context": None}, "predicted_prefill_tps": None,
                "predicted_ttft_ms": None, "speed_basis": "unavailable: no speed prediction was made"}
    return {
        "predicted_decode_tps": {"empty_context": _rounded(speed.decode_tps_empty),
                                 "full_context": _rounded(speed.decode_tps_full)},
        "predicted_prefill_tps": _rounded(speed.prefill_tps),
        "predicted_ttft_ms": _rounded(speed.ttft_ms),
        "speed_basis": speed.basis,
    }
