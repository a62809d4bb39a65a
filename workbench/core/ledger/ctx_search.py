"""The largest context, in llama.cpp's 256-cell steps, that a monotone fits() test passes."""

from __future__ import annotations

from collections.abc import Callable

from workbench.core.ledger.kv_layers import CTX_PAD


def largest_fitting_ctx(fits: Callable[[int], bool], high_steps: int) -> int:
    """The largest multiple of CTX_PAD up to `high_steps` x CTX_PAD for which fits(ctx) holds, 0 if none
    (a binary search: fits must hold for every context below one that fits)."""
    low, high = 0, high_steps
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle * CTX_PAD):
            low = middle
        else:
            high = middle - 1
    return low * CTX_PAD
