"""The largest context, in llama.cpp's 256-cell steps, that a monotone fits() test passes."""

from __future__ import annotations

from collections.abc import Callable

from workbench.core.ledger.kv_layers import CTX_PAD


def largest_fitting_ctx(fits: Callable[[int], bool], high_steps: int, *, near_top: bool = False) -> int:
    """The largest multiple of CTX_PAD up to `high_steps` x CTX_PAD for which fits(ctx) holds, 0 if none
    (fits must hold for every context below one that fits).

    A binary search over the whole range. With `near_top` (a bound usually just above the answer) the
    search first steps down from the top by 1, 2, 4 ... steps until a context fits, then halves the last
    step: a few tests when the answer is close to the bound instead of one per halving of the range, about
    twice the halvings when it is far below. The answer is the same either way."""
    low, high = 0, high_steps
    if near_top:
        gap = 0  # steps below the top: 0, 1, 3, 7 ...
        while high > 0:
            probe = max(high_steps - gap, 1)
            if fits(probe * CTX_PAD):
                low = probe
                break
            high, gap = probe - 1, 2 * gap + 1
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle * CTX_PAD):
            low = middle
        else:
            high = middle - 1
    return low * CTX_PAD
