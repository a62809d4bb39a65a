"""What crosses the pipe for several llama.cpp sequences decoded together: requests and events, each tagged."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.core.engine.events import ChatMessage, Sampling


@dataclass(frozen=True)
class SequenceRequest:
    """One generation: chat `messages` (rendered with the model's template) or a raw `prompt`.

    `max_tokens` None means "as many as the slot's context leaves" (the OpenAI default);
    otherwise it overrides `sampling.max_tokens`. `stop` strings end the answer and are not
    part of it. The penalties are llama.cpp's (OpenAI's frequency/presence penalties).
    """

    messages: tuple[ChatMessage, ...] = ()
    prompt: str | None = None
    sampling: Sampling = Sampling()
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0


# -- client -> engine -------------------------------------------------------------------------
@dataclass(frozen=True)
class SequencesOpen:
    """Enter serving mode: `n_slots` sequences; each request may use n_ctx // n_slots cells."""

    n_slots: int


@dataclass(frozen=True)
class SequenceSubmit:
    request_id: int
    request: SequenceRequest


@dataclass(frozen=True)
class SequenceCancel:
    request_id: int


@dataclass(frozen=True)
class SequencesClose:
    pass


@dataclass(frozen=True)
class SamplesRequest:
    """N samples of one prompt: evaluated once in sequence 0, copied to 1..N-1, decoded together."""

    request: SequenceRequest
    n: int


# -- engine -> client -------------------------------------------------------------------------
@dataclass(frozen=True)
class SequencesOpened:
    n_slots: int
    n_ctx: int  # llama.cpp's context (all slots share its cells: kv_unified)
    slot_ctx: int  # cells one request may use: n_ctx // n_slots (llama-server's -c/-np rule)
    n_seq_max: int  # llama_n_seq_max of the context
    kv_unified: bool
    context_recreated: bool  # the context was made again with more sequences (the model stayed)
    kv_buffer_bytes: int = 0  # llama.cpp's report for the re-created context (0: not re-created)
    compute_buffer_bytes: int = 0
    rs_buffer_bytes: int = 0


@dataclass(frozen=True)
class SequenceAccepted:
    request_id: int
    prompt_tokens: int
    max_tokens: int  # the answer's budget in this slot
    queued: int  # requests waiting ahead of this one (0: it gets a slot at the next step)


@dataclass(frozen=True)
class SequenceRejected:
    request_id: int
    kind: str  # "too_long", "bad_request"
    message: str


@dataclass(frozen=True)
class SequenceStarted:
    request_id: int
    slot: int
    queued_s: float  # from submission to getting a slot


@dataclass(frozen=True)
class SequenceTokens:
    request_id: int
    text: str
    n_tokens: int
    timestamps: tuple[float, ...]  # each token's engine time (time.monotonic())


@dataclass(frozen=True)
class SequenceFinished:
    request_id: int
    slot: int
    text: str
    stop_reason: str  # "stop" (end of generation or a stop string), "length", "cancelled", "error"
    prompt_tokens: int
    generated_tokens: int
    logprob_sum: float  # Σ log p(token) under the model's own distribution (before sampling settings)
    queued_s: float
    ttft_s: float  # submission to first token (queue wait included), engine clock
    submitted_at: float
    started_at: float
    finished_at: float


@dataclass(frozen=True)
class SlotState:
    slot: int
    request_id: int | None
    phase: str  # "idle", "prefill", "decode"
    kv_cells: int  # llama_memory_seq_pos_max + 1 for this sequence (0 when empty)
    prompt_tokens: int
    generated_tokens: int
    ttft_s: float | None
    decode_tps: float | None  # generated tokens after the first / time since the first


@dataclass(frozen=True)
class SequencesStatus:
    at: float
    slots: tuple[SlotState, ...]
    waiting: int
    n_ctx: int
    slot_ctx: int
    kv_cells_used: int  # sum of the sequences' cells, shared (copied) prompt cells counted once
    decode_calls: int  # llama_decode calls since the session opened
    last_batch_tokens: int
    last_batch_sequences: int
    max_batch_sequences: int  # most sequences one llama_decode call held
    tokens_in: int  # prompt tokens evaluated
    tokens_out: int  # tokens generated
    llama_seconds: float = 0.0  # time spent in llama_decode (to llama_synchronize), all steps
    decode_steps: tuple[DecodeSteps, ...] = ()  # next-token-only steps, by how many sequences they held


@dataclass(frozen=True)
class DecodeSteps:
    """llama.cpp's own batched decode as the server ran it: steps of `sequences` next tokens, no prompt."""

    sequences: int
    steps: int
    seconds: float  # in llama_decode to llama_synchronize, the engine's perf_counter


@dataclass(frozen=True)
class SequencesClosed:
    decode_calls: int
    max_batch_sequences: int
    error: str = ""  # why the session ended on its own (a failed llama_decode); "" when closed as asked


@dataclass(frozen=True)
class Sample:
    text: str
    stop_reason: str
    generated_tokens: int
    logprob_sum: float


@dataclass(frozen=True)
class SamplesFinished:
    """The answer to SamplesRequest; counts from llama.cpp's perf counters where named so."""

    samples: tuple[Sample, ...]
    prompt_tokens: int
    max_tokens: int  # per sample, after fitting N answers into the context
    decode_calls: int  # llama_decode calls, prompt chunks included (our count)
    max_batch_sequences: int
    llama_tokens_evaluated: int  # llama.cpp's n_p_eval + n_eval: every token it decoded
    sampled_tokens_decoded: int  # sampled tokens fed back to llama_decode (our count; a sample's last is not)
    llama_eval_s: float  # llama.cpp's t_p_eval + t_eval
    prompt_s: float  # submission to the prompt's logits (engine clock)
    wall_s: float
    started_at: float
    finished_at: float

    @property
    def prompt_evaluations(self) -> float:
        """Times llama.cpp evaluated the prompt: its own token count less the sampled tokens fed back, over
        the prompt's length. 1 when the prompt is evaluated once and shared, N when each sample evaluates its own."""
        return (self.llama_tokens_evaluated - self.sampled_tokens_decoded) / self.prompt_tokens
