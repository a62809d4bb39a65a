"""Numbered requests of thread workers: what a request posts after a later one of its kind was asked for is stale.

A thread worker that a later one cancels (exclusive=True) is only marked cancelled: its thread runs on
and posts when it ends, possibly after the later one's answer. Its receiver drops that answer.
"""

from __future__ import annotations


class Requests:
    """The latest request of each kind (a worker group)."""

    def __init__(self) -> None:
        self._latest: dict[str, int] = {}

    def ask(self, kind: str) -> int:
        """A new request of `kind`: its number, to send with the worker and back with its messages."""
        self._latest[kind] = self._latest.get(kind, 0) + 1
        return self._latest[kind]

    def stale(self, kind: str, request: int) -> bool:
        return self._latest.get(kind) != request
