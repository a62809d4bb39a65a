"""Why a sequence request cannot run: a whole request refused (SequencesUnavailable), or one request's problem."""

from __future__ import annotations

import math

from workbench.core.engine.sampling_checks import sampling_problems
from workbench.core.engine.sequence_events import SequenceRequest


class SequencesUnavailable(Exception):
    """The request cannot run at all (e.g. N answers do not fit the context); one line for the user."""


def request_problem(request: SequenceRequest) -> tuple[str, str] | None:
    problems = sampling_problems(request.sampling)
    if problems:
        return "bad_request", "; ".join(text for _field, text in problems)
    if request.prompt is None and not request.messages:
        return "bad_request", "the request has neither a prompt nor messages"
    if request.max_tokens is not None and request.max_tokens < 1:
        return "bad_request", f"max_tokens {request.max_tokens} must be at least 1"
    for name, value in (("frequency_penalty", request.frequency_penalty), ("presence_penalty", request.presence_penalty)):
        if not (math.isfinite(value) and -2.0 <= value <= 2.0):
            return "bad_request", f"{name} {value} must be between -2 and 2"
    return None


def length_problem(prompt_tokens: int, max_tokens: int | None, slot_ctx: int) -> tuple[str, str] | None:
    if prompt_tokens == 0:
        return "bad_request", "the prompt is empty"
    if prompt_tokens >= slot_ctx:
        return "too_long", (f"the prompt takes {prompt_tokens} tokens; a slot's context holds {slot_ctx} "
                            "(with room for at least one answer token): shorten it")
    if max_tokens is not None and prompt_tokens + max_tokens > slot_ctx:
        return "too_long", (f"a slot's context holds {slot_ctx} tokens, but {prompt_tokens + max_tokens} were asked "
                            f"({prompt_tokens} in the prompt, {max_tokens} for the answer): "
                            f"lower max_tokens to {slot_ctx - prompt_tokens} or shorten the prompt")
    return None
