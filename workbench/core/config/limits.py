"""One set of limits for what a person sets, used by the preset files, the CLI, the app's forms and the API."""

from __future__ import annotations

# Context, in tokens: llama.cpp's own ceiling is far above; past 16,777,216 a value is a typo, not a plan.
CTX_MIN = 16
CTX_MAX = 1 << 24

# Sampling temperature: 0 is greedy; OpenAI's API takes 0 to 2, and past 2 llama.cpp's samplers give
# near-uniform noise, so the app, the CLI and our API take the same range.
TEMPERATURE_MIN = 0.0
TEMPERATURE_MAX = 2.0


def ctx_problem(ctx: int, *, trained_allowed: bool = True) -> str:
    """Why `ctx` is no context size ("" when it is one); 0 is the model's trained context where allowed."""
    if trained_allowed and ctx == 0:
        return ""
    if not CTX_MIN <= ctx <= CTX_MAX:
        zero = "0 (the model's trained context) or " if trained_allowed else ""
        return f"must be {zero}{CTX_MIN} to {CTX_MAX:,} tokens"
    return ""
