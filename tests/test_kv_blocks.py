"""The KV grid: block labels by majority, partial blocks shown, free remainder, block size choice."""

from __future__ import annotations

import pytest

from workbench.core.ledger.kv_blocks import FREE, choose_block_tokens, kv_block_map


def test_majority_label_per_block():
    blocks = kv_block_map([("system", 16), ("history", 40), ("current", 8)], n_ctx=128, n_blocks=8)
    # cells: system 0-15, history 16-55, current 56-63, free 64-127; blocks of 16 cells;
    # block 3 holds 8 history and 8 current cells: the tie goes to the more recent segment
    assert blocks == ("system", "history", "history", "current", FREE, FREE, FREE, FREE)
    blocks = kv_block_map([("system", 16), ("history", 41), ("current", 7)], n_ctx=128, n_blocks=8)
    assert blocks[3] == "history"


def test_partially_filled_block_shows_its_segment():
    assert kv_block_map([("current", 1)], n_ctx=4096, n_blocks=16) == ("current",) + (FREE,) * 15


def test_empty_and_degenerate_inputs():
    assert kv_block_map([], n_ctx=256, n_blocks=4) == (FREE,) * 4
    assert kv_block_map([("system", 10)], n_ctx=256, n_blocks=0) == ()
    assert kv_block_map([("system", 10)], n_ctx=0, n_blocks=3) == (FREE,) * 3
    assert kv_block_map([("system", 0), ("history", -5)], n_ctx=64, n_blocks=2) == (FREE, FREE)


def test_full_and_overfull_context():
    blocks = kv_block_map([("reused", 100), ("current", 100)], n_ctx=128, n_blocks=4)
    assert blocks == ("reused", "reused", "reused", "current")
    assert FREE not in blocks


def test_uneven_division_covers_every_cell():
    blocks = kv_block_map([("history", 90), ("current", 10)], n_ctx=100, n_blocks=7)
    assert len(blocks) == 7 and blocks[-1] == "current" and blocks[:-1] == ("history",) * 6


@pytest.mark.parametrize(("n_ctx", "max_cells", "expected"), [
    (4096, 256, 16), (4096, 255, 32), (8192, 100, 128), (100, 1000, 16), (131072, 64, 2048), (4096, 0, 4096),
])
def test_choose_block_tokens(n_ctx: int, max_cells: int, expected: int):
    tokens = choose_block_tokens(n_ctx, max_cells)
    assert tokens == expected
    assert tokens & (tokens - 1) == 0 and tokens >= 16
    assert -(-n_ctx // tokens) <= max(1, max_cells)
    if tokens > 16:
        assert -(-n_ctx // (tokens // 2)) > max(1, max_cells)


def test_window_cache_fills_then_stays_full():
    from workbench.core.ledger.kv_blocks import window_bar, window_cells_used

    assert window_cells_used(300, 1024) == 300
    assert window_cells_used(5000, 1024) == 1024  # the window keeps the newest tokens only
    assert window_bar(512, 1024, 16) == (8, 8)
    assert window_bar(4096, 1024, 16) == (16, 0)
    assert window_bar(10, 0, 8) == (0, 8)
