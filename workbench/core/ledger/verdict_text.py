"""The ledger's verdict in words: when it does not fit, the whole overrun and the lines that make the total;
when it fits, the headroom. One wording for the CLI and the app, in MiB (llama.cpp's unit)."""

from __future__ import annotations

from collections.abc import Sequence

from workbench.core.ledger.types import DOES_NOT_FIT, TIGHT, Ledger
from workbench.core.units import mib


def budget_text(ledger: Ledger) -> str:
    return f"the {mib(ledger.budget_bytes)} left for the LLM on {ledger.device}"


def ledger_lines(ledger: Ledger) -> list[tuple[str, int, str]]:
    """The lines that add up to the total: (name, bytes, detail)."""
    lines = [
        ("the weights", ledger.weights_bytes, ""),
        ("the KV cache", ledger.kv_bytes, f" (ctx {ledger.ctx_size:,}, {ledger.cache_type_k}/{ledger.cache_type_v})"),
        ("the recurrent state", ledger.rs_bytes, ""),  # 0 (left out) without recurrent layers
        ("the compute buffer", ledger.compute_bytes, ""),
        ("the runtime overhead", ledger.overhead_bytes, ""),
    ]
    return lines


def overrun_words(lines: Sequence[tuple[str, int, str]], total: int, budget: int, budget_words: str) -> str:
    """'the weights 139 MiB + ... = 349 MiB predicted, 87 MiB over <budget_words>', lines largest first.

    The overrun is the whole total minus the budget, never the running total at the first line
    that crosses the budget; each line that alone is larger than the budget is named as such."""
    lines = sorted(lines, key=lambda line: -line[1])
    text = (" + ".join(f"{name} {mib(n_bytes)}{detail}" for name, n_bytes, detail in lines if n_bytes > 0)
            + f" = {mib(total)} predicted, {mib(total - budget)} over {budget_words}")
    alone = [name for name, n_bytes, _ in lines if n_bytes > budget]
    if len(alone) == 1:
        text += f" — {alone[0]} alone {'are' if alone[0] == 'the weights' else 'is'} over the budget"
    elif alone:
        text += f" — {', '.join(alone[:-1])} and {alone[-1]} are each over the budget alone"
    return text


def overrun_text(ledger: Ledger) -> str:
    """The ledger's overrun: every line of its total against the budget left for the LLM."""
    return overrun_words(ledger_lines(ledger), ledger.total_bytes, ledger.budget_bytes, budget_text(ledger))


def verdict_reason(ledger: Ledger) -> str:
    """The ledger's one sentence: 'does not fit: <overrun_text>', 'tight: ...' or 'fits with ...'."""
    if ledger.verdict == DOES_NOT_FIT:
        return f"does not fit: {overrun_text(ledger)}"
    share = ledger.headroom_bytes / ledger.budget_bytes if ledger.budget_bytes else 0.0
    if ledger.verdict == TIGHT:
        return f"tight: {mib(ledger.headroom_bytes)} headroom is under 10% of {budget_text(ledger)}"
    return f"fits with {mib(ledger.headroom_bytes)} ({share:.0%}) headroom in {budget_text(ledger)}"


def verdict_sentence(ledger: Ledger) -> str:
    """The verdict as the CLI and the app's verdict line say it: 'DOES NOT FIT — <overrun_text>',
    'FITS — 205 MiB predicted, 57 MiB (22%) headroom in ...'."""
    if ledger.verdict == DOES_NOT_FIT:
        return f"DOES NOT FIT — {overrun_text(ledger)}"
    share = ledger.headroom_bytes / ledger.budget_bytes if ledger.budget_bytes else 0.0
    return (f"{ledger.verdict.upper()} — {mib(ledger.total_bytes)} predicted, {mib(ledger.headroom_bytes)} "
            f"({share:.0%}) headroom in {budget_text(ledger)}")
