"""Accuracy statistics: the Wilson score interval and the Pareto front of (cost, accuracy) points."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

Z_95 = 1.959963984540054  # two-sided 95% normal quantile

T = TypeVar("T")


def wilson_interval(correct: int, total: int, z: float = Z_95) -> tuple[float, float]:
    """95% Wilson score interval for a proportion (Wilson 1927); well behaved at 0/n and n/n."""
    if total <= 0:
        raise ValueError("the interval of an empty sample is undefined")
    if not 0 <= correct <= total:
        raise ValueError(f"{correct} correct out of {total} is impossible")
    p = correct / total
    z2 = z * z
    centre = (p + z2 / (2 * total)) / (1 + z2 / total)
    half = z / (1 + z2 / total) * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total))
    return max(0.0, centre - half), min(1.0, centre + half)


def pareto_front(items: Sequence[T], cost: Callable[[T], float | None], accuracy: Callable[[T], float]) -> list[T]:
    """The items no other item beats: nothing at most as costly is more accurate, or as accurate and cheaper.

    Items whose cost is unknown (None) take no part. Order: cheapest first.
    """
    known = [item for item in items if cost(item) is not None]
    front = []
    for item in known:
        c, a = cost(item), accuracy(item)
        dominated = any(
            (cost(other) <= c and accuracy(other) >= a) and (cost(other) < c or accuracy(other) > a)
            for other in known
            if other is not item
        )
        if not dominated:
            front.append(item)
    return sorted(front, key=lambda item: (cost(item), -accuracy(item)))
