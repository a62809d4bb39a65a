"""After a load: each buffer llama.cpp reported against the ledger's prediction, and the one line that says a mismatch."""

from __future__ import annotations

from workbench.core.ledger.types import Ledger
from workbench.core.units import MIB

MISMATCH_SHARE = 0.05  # a reported buffer more than 5% off its prediction is said after the load


def predicted_buffers(ledger: Ledger) -> tuple[tuple[str, int], ...]:
    """The ledger's figure for each buffer llama.cpp reports: the weights with the CPU_REPACK copy (llama.cpp's
    CPU_Mapped and CPU_REPACK model buffers are summed in one report), the KV cache, the recurrent state, the
    compute buffer."""
    return (("weights", ledger.weights_bytes + ledger.cpu_repack_bytes), ("KV", ledger.kv_bytes),
            ("RS", ledger.rs_bytes), ("compute", ledger.compute_bytes))


def buffer_errors(predicted: tuple[tuple[str, int], ...], reported: dict[str, int]) -> tuple[tuple[str, float], ...]:
    """(buffer, (reported - predicted) / predicted x 100) for each buffer both sides have a figure for."""
    errors = []
    for name, bytes_predicted in predicted:
        got = reported.get(name)
        if bytes_predicted > 0 and got:
            errors.append((name, (got - bytes_predicted) / bytes_predicted * 100))
    return tuple(errors)


def mismatch_line(predicted: tuple[tuple[str, int], ...], reported: dict[str, int]) -> str:
    """One line naming every buffer more than 5% off, with both figures; "" when all agree."""
    expected = dict(predicted)
    off = [(name, pct) for name, pct in buffer_errors(predicted, reported) if abs(pct) > MISMATCH_SHARE * 100]
    if not off:
        return ""
    parts = [f"{name} {reported[name] / MIB:,.1f} MiB reported vs {expected[name] / MIB:,.1f} MiB predicted ({pct:+.0f}%)"
             for name, pct in off]
    return "llama.cpp's buffers differ from the ledger by more than 5%: " + "; ".join(parts)
