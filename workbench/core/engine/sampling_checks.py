"""Checks on sampling settings, shared by the CLI, the UI and the engine client."""

from __future__ import annotations

import math
from collections.abc import Mapping

from workbench.core.config.limits import TEMPERATURE_MAX, TEMPERATURE_MIN
from workbench.core.engine.events import Sampling
from workbench.core.errors import WorkbenchError

# (field, the rule in words, the test); the words are what the user reads.
_RULES = (
    ("temperature", f"must be {TEMPERATURE_MIN:g} to {TEMPERATURE_MAX:g} (0 = greedy)",
     lambda v: TEMPERATURE_MIN <= v <= TEMPERATURE_MAX),
    ("top_p", "must be more than 0 and at most 1", lambda v: 0 < v <= 1),
    ("top_k", "must be 0 or more (0 = no limit)", lambda v: v >= 0),
    ("min_p", "must be between 0 and 1", lambda v: 0 <= v <= 1),
    ("repeat_penalty", "must be more than 0 (1 = none)", lambda v: v > 0),
    ("seed", "must be -1 (random) or a number from 0 to 4294967295", lambda v: -1 <= v < 2**32),
    ("max_tokens", "must be at least 1", lambda v: v >= 1),
)


def sampling_problems(sampling: Sampling, labels: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """Each out-of-range setting as (field name, "temperature -1 must be 0 or more ..."); () when all are fine.

    `labels` renames fields in the words (the CLI says "--temp", not "temperature").
    """
    problems = []
    for field, rule, holds in _RULES:
        value = getattr(sampling, field)
        # NaN passes no comparison's negation test, so finiteness is checked first.
        if not (isinstance(value, (int, float)) and math.isfinite(value) and holds(value)):
            shown = f"{value:g}" if isinstance(value, float) else repr(value)
            problems.append((field, f"{(labels or {}).get(field, field)} {shown} {rule}"))
    return tuple(problems)


def validate_sampling(sampling: Sampling, labels: Mapping[str, str] | None = None) -> None:
    """WorkbenchError (one line naming every bad setting) unless all of `sampling` is in range."""
    problems = sampling_problems(sampling, labels)
    if problems:
        raise WorkbenchError(
            "bad sampling settings: " + "; ".join(text for _field, text in problems),
            fix="Change them and try again",
        )
