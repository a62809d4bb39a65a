"""Majority vote over N sampled answers; a tie goes to the answer with the larger summed log-probability."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SampledAnswer:
    """One sample: its text, the extracted answer (None: unparseable) and the sum of its token log-probs."""

    text: str
    answer: str | None
    logprob: float
    n_tokens: int


@dataclass(frozen=True)
class VoteCount:
    answer: str
    votes: int
    logprob_sum: float  # summed over the samples that gave this answer


@dataclass(frozen=True)
class VoteResult:
    """The winner (None when no sample gave a parseable answer) and every answer's tally, winner first."""

    answer: str | None
    counts: tuple[VoteCount, ...]
    unparseable: int  # samples with no extractable answer: they do not vote
    tie_broken: bool  # the winner shared the top vote count and won on log-probability


def majority_vote(samples: Sequence[SampledAnswer]) -> VoteResult:
    tallies: dict[str, list[float]] = {}
    unparseable = 0
    for sample in samples:
        if sample.answer is None:
            unparseable += 1
            continue
        tallies.setdefault(sample.answer, []).append(sample.logprob)
    counts = sorted(
        (VoteCount(answer, len(logprobs), sum(logprobs)) for answer, logprobs in tallies.items()),
        key=lambda count: (-count.votes, -count.logprob_sum, count.answer),
    )
    if not counts:
        return VoteResult(None, (), unparseable, False)
    tie_broken = len(counts) > 1 and counts[1].votes == counts[0].votes
    return VoteResult(counts[0].answer, tuple(counts), unparseable, tie_broken)
