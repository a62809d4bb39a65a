"""What the engine-side measurement ops return: small frozen values that cross the pipe."""

from __future__ import annotations

from dataclasses import dataclass

PERF_COUNTERS = "llama.cpp perf counters"
WALL_CLOCK = "wall clock"


@dataclass(frozen=True)
class PerplexityMeasured:
    """Perplexity of one text: exp(mean negative log-likelihood of every scored token)."""

    ppl: float
    n_tokens_scored: int
    n_tokens_text: int
    n_ctx: int  # window length the text was scored in
    n_windows: int
    seconds: float


@dataclass(frozen=True)
class SpeedMeasured:
    """One llama-bench style run: prefill of n_prompt tokens, then n_gen single-token decodes."""

    n_prompt: int
    n_gen: int
    prefill_seconds: float
    prefill_tps: float
    ttft_seconds: float  # prefill plus picking the first generated token
    decode_seconds: float
    decode_tps: float
    timing_source: str  # PERF_COUNTERS or WALL_CLOCK
    started_at: float  # time.monotonic() in the engine, for matching telemetry samples
    finished_at: float


@dataclass(frozen=True)
class RatesMeasured:
    """Prefill and decode at one thread count and context depth, llama-bench's -d style (a device probe's unit)."""

    threads: int
    depth: int  # tokens in the context before the timed prompt and the timed decodes
    n_prompt: int
    prefill_seconds: float  # the best of the repeats
    n_gen: int
    decode_seconds_per_token: float  # the median over the decoded tokens: robust to another process's burst
    started_at: float  # time.monotonic() in the engine
    finished_at: float
    decode_best_seconds_per_token: float = 0.0  # the fastest decoded token


@dataclass(frozen=True)
class EngineFacts:
    """llama.cpp's build and what it says about the loaded model and context."""

    llama_cpp_version: str
    system_info: str  # llama_print_system_info(): the CPU features the build uses
    model_type: str  # llama_model_desc(), e.g. "llama ?B Q4_1"
    model_size_bytes: int
    model_n_params: int
    n_ctx: int
    n_batch: int
    n_ubatch: int
    n_threads: int
    build_commit: str = ""  # ggml_commit(): the llama.cpp commit the library was built from (llama-bench's)
