"""A task's questions and the task itself: a deterministic generator plus its answer extractor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Question:
    """One question: the text the model sees and the one exact answer (canonical form)."""

    task: str
    index: int
    prompt: str
    answer: str


@dataclass(frozen=True)
class Task:
    """A named task. `generate(count, seed)` is deterministic: the same seed gives the same questions."""

    name: str
    description: str
    source: str  # where the questions come from (generator and licence, or the asset's source)
    instruction: str  # the system prompt that asks for the answer's form
    generate: Callable[[int, int], tuple[Question, ...]]
    extract: Callable[[str], str | None]  # the answer in canonical form, or None when unparseable
    default_limit: int = 50
    max_tokens: int = 24  # generation budget per sample: enough for the answer and a few words
