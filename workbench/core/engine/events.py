"""What crosses the pipe between the engine process and its client: small frozen values."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    seed: int = -1  # -1 = random
    max_tokens: int = 512


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system", "user", "assistant"
    content: str


@dataclass(frozen=True)
class LoadProgressed:
    stage: str  # "validating", "quantizing", "loading", ...
    fraction: float  # 0..1; negative when unknown
    message: str = ""  # e.g. a re-quantization warning, or what is being quantized
    memory_limit_bytes: int = 0  # the engine's address-space limit for this load, when one is set


@dataclass(frozen=True)
class DeviceBuffers:
    """One device's buffers as llama.cpp logged them at load (CPU_Mapped, CPU_REPACK, ... count as "CPU")."""

    name: str  # "CPU", "RPC0", "CUDA0", "Vulkan0"
    endpoint: str = ""  # "host:port" of an RPC node
    model_bytes: int = 0
    kv_bytes: int = 0  # KV cache plus recurrent state
    compute_bytes: int = 0
    output_bytes: int = 0  # the logits buffer (host only)

    @property
    def total_bytes(self) -> int:
        return self.model_bytes + self.kv_bytes + self.compute_bytes + self.output_bytes


@dataclass(frozen=True)
class Loaded:
    model_path: str
    preset_name: str
    n_ctx: int  # the context llama.cpp really gave (it may round ctx_size up)
    n_ctx_train: int
    model_buffer_bytes: int  # as llama.cpp reported them in its log
    kv_buffer_bytes: int
    compute_buffer_bytes: int
    load_seconds: float
    rss_bytes: int  # engine process memory right after load
    uss_bytes: int
    pid: int
    warnings: tuple[str, ...] = ()
    output_buffer_bytes: int = 0  # llama.cpp's "output buffer" (logits), reported beside compute
    weights_type: str = ""  # file type of what was loaded ("Q4_1", ...)
    loaded_path: str = ""  # the file llama.cpp opened: the re-quantized cache file when the preset asked for other weights
    prediction: str = ""  # the ledger's prediction for this load, one line
    devices: tuple[DeviceBuffers, ...] = ()  # per device, host first, then RPC nodes and GPUs in llama.cpp's order
    chat_mode: str = "model"  # chat_mode.MODEL_TEMPLATE, BUILTIN_TEMPLATE or COMPLETION
    chat_notice: str = ""  # the one message saying which chat path was taken ("" = the model's own template)
    n_threads: int = 0  # the threads llama.cpp was given (0 = not reported)
    cpu_cores: tuple[int, ...] = ()  # the CPUs the engine is pinned to; () = not pinned (every CPU it may use)
    cores_note: str = ""  # which cores and why, one sentence
    prediction_check: str = ""  # one line when a reported buffer is over 5% off the ledger (ledger/buffer_check)
    prediction_errors_pct: tuple[tuple[str, float], ...] = ()  # (buffer, reported vs predicted, %)
    rs_buffer_bytes: int = 0  # llama.cpp's recurrent-state ("RS") buffer; 0 for a model without one
    n_seq_max: int = 1  # sequences the context was made for (the preset's parallel)


@dataclass(frozen=True)
class TokenChunk:
    text: str
    n_tokens: int
    timestamp: float  # time.monotonic() in the engine (system-wide clock on Linux)
    timestamps: tuple[float, ...] = ()  # each token's engine time (n_tokens of them; timestamp is the last)


@dataclass(frozen=True)
class ContextShifted:
    turns_dropped: int
    tokens_dropped: int


@dataclass(frozen=True)
class PrefillProgressed:
    """The prompt is being read in batches: `evaluated` of the `total` new prompt tokens are in the cache."""

    evaluated: int
    total: int


@dataclass(frozen=True)
class TurnFinished:
    text: str
    stop_reason: str  # "stop", "length", "cancelled"
    prompt_tokens: int
    reused_tokens: int  # served from the prefix cache, not recomputed
    generated_tokens: int
    ttft_s: float
    prefill_tps: float
    decode_tps: float
    kv_cells_used: int
    n_ctx: int
    context_shifts: int  # turns dropped before this turn
    started_at: float  # time.monotonic() in the engine
    finished_at: float
    draft_accepted: int = 0  # prompt-lookup speculative decoding
    draft_proposed: int = 0
    prefill_s: float = 0.0  # llama.cpp's prompt-eval time for the evaluated (not reused) tokens
    decode_s: float = 0.0  # llama.cpp's eval time for generated tokens after the first
    answer_note: str = ""  # why the answer is empty, or that the logits were not finite ("" = an ordinary answer)


@dataclass(frozen=True)
class EngineFailed:
    kind: str  # "load", "crash", "refused", "request"
    message: str
    log_tail: tuple[str, ...] = ()
    exit_signal: str = ""  # "SIGKILL", "SIGSEGV", ... for a crash
    exit_code: int | None = None
    prediction: str = ""  # what the ledger predicted, for a crash during load or chat
    cancel_unanswered: bool = False  # the client killed it: a cancel went unanswered within the grace


@dataclass(frozen=True)
class Unloaded:
    pass
