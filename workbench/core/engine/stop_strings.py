"""Stop strings for streamed text: text is released only once it cannot be the start of a stop string."""

from __future__ import annotations

from collections.abc import Sequence


class StopStringFilter:
    """Feed decoded text; get back what may be shown now, and whether a stop string was hit.

    A stop string may arrive split over several tokens, so the tail of the text that could
    still grow into one is held back until the next piece decides it.
    """

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(stop for stop in stops if stop)
        self._held = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        if self.stopped:
            return ""
        if not self._stops:
            return text
        held = self._held + text
        cut = min((index for index in (held.find(stop) for stop in self._stops) if index >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            self._held = ""
            return held[:cut]
        keep = max((_partial_suffix(held, stop) for stop in self._stops), default=0)
        self._held = held[len(held) - keep:] if keep else ""
        return held[: len(held) - keep]

    def flush(self) -> str:
        """The held-back tail at the end of generation (it never became a stop string)."""
        held, self._held = self._held, ""
        return "" if self.stopped else held


def _partial_suffix(text: str, stop: str) -> int:
    """Length of the longest end of `text` that is a proper start of `stop`."""
    for length in range(min(len(text), len(stop) - 1), 0, -1):
        if stop.startswith(text[-length:]):
            return length
    return 0
