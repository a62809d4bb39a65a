"""How many sequences a preset's context holds (llama-server -np, the engine's slots) and how their cache is laid out."""

from __future__ import annotations

from workbench.core.config.preset import Preset


def preset_n_seq(preset: Preset) -> int:
    """llama.cpp's n_seq_max for `preset`: its `parallel` sequences (at least 1)."""
    return max(1, preset.parallel)


def preset_kv_unified(preset: Preset) -> bool:
    """Whether the sequences share one KV stream of n_ctx cells (kv_unified).

    With several sequences both the engine (engine/sequence_context.py) and llama-server's
    default make the cache unified: every sequence may use the whole context, and the
    sliding-window cache grows to window x n_seq + ubatch. One sequence is the same either way.
    """
    return preset_n_seq(preset) > 1
