"""The chat's optional "N samples, vote" mode: how many samples, and the worker that samples them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from workbench.core.engine.events import ChatMessage, EngineFailed, Sampling
from workbench.core.errors import WorkbenchError
from workbench.ui.engine_session import Engine
from workbench.ui.messages import EngineDied, VoteArrived

VOTE_CHOICES = (1, 3, 5, 8)  # 1 = off: a normal streamed answer


class VoteMode:
    """How many samples each chat turn takes; the chat pane owns one and cycles it."""

    def __init__(self) -> None:
        self.samples = 1

    @property
    def on(self) -> bool:
        return self.samples > 1

    def cycle(self) -> int:
        self.samples = VOTE_CHOICES[(VOTE_CHOICES.index(self.samples) + 1) % len(VOTE_CHOICES)]
        return self.samples

    def label(self) -> str:
        return f"{self.samples} samples, vote" if self.on else "one streamed answer"


def sample_and_vote(engine: Engine, messages: Sequence[ChatMessage], sampling: Sampling, n: int, n_ctx: int,
                    post: Callable[[object], object]) -> None:
    """Worker body: N samples decoded together in the engine, then VoteArrived (or EngineDied)."""
    try:
        finished = engine.sample_n(list(messages), n, sampling)
    except WorkbenchError as error:
        failure = getattr(error, "failure", None) or EngineFailed("request", str(error))
        post(EngineDied(failure))
        return
    post(VoteArrived(finished, n, n_ctx))
