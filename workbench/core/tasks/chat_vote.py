"""The chat's "N samples, vote" mode: vote over free-text answers and make the winner a normal turn."""

from __future__ import annotations

import re
from collections.abc import Sequence

from workbench.core.engine.events import TurnFinished
from workbench.core.tasks.extract import first_number
from workbench.core.tasks.vote import SampledAnswer, VoteResult, majority_vote

VOTE_KEY_CHARS = 200


def answer_key(text: str) -> str | None:
    """What two answers must share to count as the same vote: the number they give, else the normalised text."""
    number = first_number(text)
    if number is not None:
        return number
    words = re.sub(r"\s+", " ", text).strip().strip(".!").casefold()
    return words[:VOTE_KEY_CHARS] or None


def vote_samples(samples: Sequence) -> tuple[VoteResult, int | None]:
    """(vote, index of the winning sample: the most likely of those that gave the winning answer)."""
    sampled = [SampledAnswer(s.text, answer_key(s.text), s.logprob_sum, s.generated_tokens) for s in samples]
    vote = majority_vote(sampled)
    if vote.answer is None:
        return vote, None
    winners = [i for i, s in enumerate(sampled) if s.answer == vote.answer]
    return vote, max(winners, key=lambda i: sampled[i].logprob)


def turn_from_samples(finished, text: str, n_ctx: int) -> TurnFinished:
    """The voted answer as the conversation records a turn; times and counts are the engine's for all N."""
    generated = sum(s.generated_tokens for s in finished.samples)
    decode_s = max(finished.wall_s - finished.prompt_s, 1e-9)
    return TurnFinished(
        text=text,
        stop_reason="stop",
        prompt_tokens=finished.prompt_tokens,
        reused_tokens=0,
        generated_tokens=generated,
        ttft_s=finished.prompt_s,
        prefill_tps=finished.prompt_tokens / max(finished.prompt_s, 1e-9),
        decode_tps=generated / decode_s,
        kv_cells_used=0,  # the N sequences' cells are freed when sampling ends
        n_ctx=n_ctx,
        context_shifts=0,
        started_at=finished.started_at,
        finished_at=finished.finished_at,
    )
