"""A bench row's measured peak RSS against the engine's expected RSS for the row's own prompt length (like
with like: ledger/resident_prompt.py), beside the ledger total it keeps as `predicted_bytes`."""

from __future__ import annotations

import dataclasses

from workbench.core.bench.rows import BenchRow
from workbench.core.config.preset import Preset
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.resident_prompt import expected_rss_after_prompt
from workbench.core.ledger.types import Ledger


def with_expected_rss(row: BenchRow, model: ModelInfo, preset: Preset, ledger: Ledger | None) -> BenchRow:
    """The row with expected_rss_bytes (after load and a pp`n_prompt` prompt) and peak RSS against it, in %."""
    expected = expected_rss_after_prompt(model, preset, ledger, row.n_prompt) if ledger is not None else None
    if expected is None:
        notes = dict(row.unavailable)
        why = notes.get("predicted_bytes") or "the ledger has no resident-memory figures for this preset"
        notes["expected_rss_bytes"] = notes["rss_vs_expected_pct"] = why
        return dataclasses.replace(row, unavailable=tuple(notes.items()))
    return dataclasses.replace(row, expected_rss_bytes=expected,
                               rss_vs_expected_pct=(row.peak_rss_bytes - expected) / expected * 100)
