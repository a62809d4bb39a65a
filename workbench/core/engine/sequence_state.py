"""One generation's state inside the scheduler (prompt progress, position, sampler, text, timings) and its seed."""

from __future__ import annotations

import codecs

from workbench.core.engine.sampler_chain import SamplerChain
from workbench.core.engine.sequence_events import SequenceRequest
from workbench.core.engine.stop_strings import StopStringFilter


class SequenceState:
    """One generation's state: prompt progress, position, sampler, text, timings."""

    def __init__(self, request_id: int, request: SequenceRequest, prompt: list[int], max_tokens: int, now: float) -> None:
        self.request_id = request_id
        self.request = request
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.submitted_at = now
        self.started_at = 0.0
        self.first_token_at: float | None = None
        self.last_token_at: float | None = None
        self.slot = -1
        self.prefilled = 0  # prompt tokens already decoded
        self.position = 0  # next position in this sequence
        self.pending: int | None = None  # sampled, to be decoded next step
        self.parent: SequenceState | None = None  # a fork waits for its parent's prompt
        self.children: list[SequenceState] = []
        self.sampler: SamplerChain | None = None
        self.generated = 0
        self.logprob_sum = 0.0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.stops = StopStringFilter(request.stop)
        self.pieces: list[str] = []
        self.unsent: list[str] = []
        self.unsent_stamps: list[float] = []
        self.stop_reason = ""
        self.is_sample = False  # one of N samples of a prompt (its request_id is its index)

    @property
    def phase(self) -> str:
        if self.parent is not None:
            return "prefill"
        return "prefill" if self.prefilled < len(self.prompt) else "decode"


def sampling_seed(sequence: SequenceState) -> int:
    """The sequence's sampling seed: samples of one prompt get seed + their index, so they differ."""
    seed = sequence.request.sampling.seed
    if seed < 0:
        return 0xFFFFFFFF  # llama.cpp's LLAMA_DEFAULT_SEED: a random one
    return (seed + sequence.request_id) % 2**32 if sequence.is_sample else seed
