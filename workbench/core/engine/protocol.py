"""Requests the client sends to the engine process, and the engine's private replies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.core.config.preset import Preset
from workbench.core.engine.events import ChatMessage, Sampling


@dataclass(frozen=True)
class LoadRequest:
    model_path: str
    preset: Preset
    quantize_to: str | None = None  # weight type to produce (or take from the cache) first
    prediction: str = ""  # the ledger's one-line prediction, echoed back in Loaded
    warnings: tuple[str, ...] = ()  # found by the client's validation, echoed back in Loaded
    memory_budget_bytes: int | None = None  # the ledger's total: the engine's RLIMIT_AS follows it (memory_limit)


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[ChatMessage, ...]
    sampling: Sampling


@dataclass(frozen=True)
class UnloadRequest:
    pass


@dataclass(frozen=True)
class RunOpRequest:
    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ShutdownRequest:
    pass


@dataclass(frozen=True)
class OpProgressed:
    """How far a long measurement op (perplexity) has come: `fraction` of its work, 0..1."""

    name: str
    fraction: float


@dataclass(frozen=True)
class OpFinished:
    """The value a measurement op returned (a picklable frozen dataclass)."""

    result: Any
