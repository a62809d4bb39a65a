"""The scheduler of several llama.cpp sequences in one context: one llama_batch per step, a sampler chain per sequence."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from workbench.core.engine.chat_template import ChatTemplate
from workbench.core.engine.sampler_chain import SamplerChain
from workbench.core.engine.sequence_events import (
    DecodeSteps,
    SequenceAccepted,
    SequenceFinished,
    SequenceRejected,
    SequenceRequest,
    SequencesStatus,
    SequenceStarted,
    SequenceTokens,
    SlotState,
)
from workbench.core.engine.sequence_requests import SequencesUnavailable, length_problem, request_problem
from workbench.core.engine.sequence_state import SequenceState, sampling_seed


class SequenceScheduler:
    """Active sequences in `n_slots` slots of one context; `step()` decodes one batch for all of them.

    Each step's llama_batch holds the next token of every decoding sequence, then prompt
    tokens of newly admitted ones up to one micro-batch (so a long prompt is taken in
    chunks and never stalls the others for more than a step). A finished or cancelled
    sequence frees its slot and its KV cells (llama_memory_seq_rm) at once.
    """

    def __init__(self, llama: Any, n_slots: int, slot_ctx: int, emit: Callable[[object], None] | None,
                 template: ChatTemplate | None = None) -> None:
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

        n_batch = int(llama.context_params.n_batch)
        if n_slots > n_batch:
            raise SequencesUnavailable(f"{n_slots} sequences need a batch of at least {n_slots} tokens; the preset's batch_size is {n_batch}")
        self._llama = llama
        self._ctx = llama.ctx
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self._vocab = llama_cpp.llama_model_get_vocab(llama.model)
        self._n_vocab = llama.n_vocab()
        self._template = template
        self._emit = emit  # None: nothing streamed (samples are collected instead)
        self.n_slots = n_slots
        self.n_ctx = llama.n_ctx()
        self.slot_ctx = slot_ctx
        self._n_batch = n_batch
        self._prefill_budget = max(1, min(n_batch, int(llama.context_params.n_ubatch)))
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self._free_slots = list(range(n_slots))
        self._waiting: deque[SequenceState] = deque()
        self._active: dict[int, SequenceState] = {}
        self._admitted_order: list[SequenceState] = []
        self.finished: list[SequenceState] = []
        self.decode_calls = 0
        self.last_batch_tokens = 0
        self.last_batch_sequences = 0
        self.max_batch_sequences = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.sampled_tokens_decoded = 0  # sampled tokens fed back to llama_decode
        self.prompt_done_at: float | None = None
        self.llama_seconds = 0.0  # time inside llama_decode (+ synchronize), all steps
        self._decode_steps: dict[int, tuple[int, float]] = {}  # sequences in a next-token-only step -> (steps, seconds)
        self._last_status_key: tuple = ()

    # -- requests ------------------------------------------------------------------------------
    def tokenize(self, request: SequenceRequest) -> list[int]:
        if request.prompt is not None:
            return self._llama.tokenize(request.prompt.encode("utf-8"), add_bos=True, special=True)
        if self._template is None:
            raise SequencesUnavailable("chat messages need the model's chat template")
        return self._template.tokenize(request.messages)

    def submit(self, request_id: int, request: SequenceRequest) -> bool:
        """Tokenize and queue a request; Accepted or Rejected is emitted at once."""
        problem = request_problem(request)
        prompt: list[int] = []
        if not problem:
            prompt = self.tokenize(request)
            problem = length_problem(len(prompt), request.max_tokens, self.slot_ctx)
        if problem:
            kind, message = problem
            self._send(SequenceRejected(request_id, kind, message))
            return False
        max_tokens = request.max_tokens if request.max_tokens is not None else self.slot_ctx - len(prompt)
        sequence = SequenceState(request_id, request, prompt, max_tokens, time.monotonic())
        ahead = max(0, len(self._waiting) + 1 - len(self._free_slots))
        self._send(SequenceAccepted(request_id, len(prompt), max_tokens, ahead))
        self._waiting.append(sequence)
        return True

    def submit_samples(self, request: SequenceRequest, prompt: list[int], n: int, max_tokens: int) -> None:
        """N sequences of one prompt: the first evaluates it, the others are forks of its cells."""
        now = time.monotonic()
        parent = SequenceState(0, request, prompt, max_tokens, now)
        parent.children = [SequenceState(i, request, prompt, max_tokens, now) for i in range(1, n)]
        for sequence in (parent, *parent.children):
            sequence.is_sample = True
        for child in parent.children:
            child.parent = parent
        self._waiting.extend([parent, *parent.children])

    def cancel(self, request_id: int, reason: str = "cancelled") -> None:
        for sequence in list(self._waiting):
            if sequence.request_id == request_id:
                self._waiting.remove(sequence)
                sequence.stop_reason = reason
                self._report_finished(sequence, time.monotonic())
                return
        for sequence in list(self._active.values()):
            if sequence.request_id == request_id:
                self._finish(sequence, reason)
                return

    def cancel_all(self, reason: str = "cancelled") -> None:
        for sequence in [*self._waiting, *self._active.values()]:
            self.cancel(sequence.request_id, reason)

    @property
    def has_work(self) -> bool:
        return bool(self._waiting or self._active)

    # -- one step ------------------------------------------------------------------------------
    def step(self) -> None:
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

        self._admit()
        entries: list[tuple[SequenceState, int, int, bool]] = []  # (sequence, token, position, wants logits)
        decoding = [s for s in self._active.values() if s.pending is not None]
        for sequence in decoding:
            entries.append((sequence, sequence.pending, sequence.position, True))
        budget = self._prefill_budget - len(entries)
        for sequence in self._admitted_order:
            if budget <= 0:
                break
            if sequence.parent is not None or sequence.prefilled >= len(sequence.prompt):
                continue
            chunk = sequence.prompt[sequence.prefilled : sequence.prefilled + budget]
            last = sequence.prefilled + len(chunk) == len(sequence.prompt)
            for offset, token in enumerate(chunk):
                entries.append((sequence, token, sequence.prefilled + offset, last and offset == len(chunk) - 1))
            budget -= len(chunk)
        if not entries:
            return
        batch = self._batch
        for index, (sequence, token, position, logits) in enumerate(entries):
            batch.token[index] = token
            batch.pos[index] = position
            batch.n_seq_id[index] = 1
            batch.seq_id[index][0] = sequence.slot
            batch.logits[index] = 1 if logits else 0
        batch.n_tokens = len(entries)
        started = time.perf_counter()
        code = llama_cpp.llama_decode(self._ctx, batch)
        if code != 0:
            raise RuntimeError(f"llama_decode returned {code} for a batch of {len(entries)} tokens"
                               + (" (no room left in the KV cache)" if code == 1 else ""))
        llama_cpp.llama_synchronize(self._ctx)  # the batch's work is done (a GPU backend returns early)
        self._book_decode(time.perf_counter() - started, len(entries), len(decoding))
        now = time.monotonic()
        self.decode_calls += 1
        self.sampled_tokens_decoded += len(decoding)
        self.last_batch_tokens = len(entries)
        self.last_batch_sequences = len({id(entry[0]) for entry in entries})
        self.max_batch_sequences = max(self.max_batch_sequences, self.last_batch_sequences)
        for index, (sequence, token, position, logits) in enumerate(entries):
            if sequence.phase == "prefill":
                sequence.prefilled = position + 1
                self.tokens_in += 1
            sequence.position = position + 1
            if logits:
                if sequence.children:  # the prompt's logits: the forks start from them too
                    children, sequence.children = sequence.children, []
                    self._fork(sequence, children, now)
                    for child in children:
                        self._sample(child, index, now)
                self._sample(sequence, index, now)

    def _book_decode(self, seconds: float, n_tokens: int, n_decoding: int) -> None:
        """llama.cpp's time per step; a step of only next tokens (no prompt) is booked by its batch size."""
        self.llama_seconds += seconds
        if n_tokens == n_decoding:
            steps, total = self._decode_steps.get(n_decoding, (0, 0.0))
            self._decode_steps[n_decoding] = (steps + 1, total + seconds)

    def _admit(self) -> None:
        now = time.monotonic()
        while self._waiting and self._free_slots:
            sequence = self._waiting.popleft()
            sequence.slot = self._free_slots.pop(0)
            sequence.started_at = now
            sequence.sampler = SamplerChain(self._llama, sequence.request, sampling_seed(sequence), sequence.prompt)
            self._active[sequence.slot] = sequence
            self._admitted_order.append(sequence)
            self._send(SequenceStarted(sequence.request_id, sequence.slot, now - sequence.submitted_at))

    def _fork(self, parent: SequenceState, children: list[SequenceState], now: float) -> None:
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

        self.prompt_done_at = now
        for child in children:
            llama_cpp.llama_memory_seq_cp(self._memory, parent.slot, child.slot, -1, -1)
            child.parent = None
            child.prefilled = len(child.prompt)
            child.position = parent.position

    def _sample(self, sequence: SequenceState, batch_index: int, now: float) -> None:
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries
        import numpy as np  # deferred: importing numpy costs start-up time

        if self.prompt_done_at is None:
            self.prompt_done_at = now
        assert sequence.sampler is not None
        token = sequence.sampler.sample(self._ctx, batch_index)
        row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self._ctx, batch_index), shape=(self._n_vocab,))
        peak = float(row.max())
        sequence.logprob_sum += float(row[token]) - (peak + math.log(float(np.exp(row - peak).sum())))
        if sequence.first_token_at is None:
            sequence.first_token_at = now
        sequence.last_token_at = now
        if llama_cpp.llama_vocab_is_eog(self._vocab, token):
            self._finish(sequence, "stop")
            return
        sequence.generated += 1
        self.tokens_out += 1
        text = sequence.decoder.decode(self._llama.detokenize([token]))
        self._add_text(sequence, sequence.stops.feed(text), now)
        if sequence.stops.stopped:
            self._finish(sequence, "stop")
        elif sequence.generated >= sequence.max_tokens:
            self._finish(sequence, "length")
        else:
            sequence.pending = token

    # A served token is sent at once, one event per token (an SSE chunk per token, as llama-server
    # streams): grouping them as the chat does would hold each token back and hide the inter-token
    # latency a client measures. Only a token whose text is still an incomplete UTF-8 character waits.
    def _add_text(self, sequence: SequenceState, text: str, stamp: float) -> None:
        if text:
            sequence.pieces.append(text)
        if self._emit is None:
            return
        sequence.unsent.append(text)
        sequence.unsent_stamps.append(stamp)
        joined = "".join(sequence.unsent)
        if joined:  # empty: an incomplete character, or text held back as a possible stop string
            self._emit(SequenceTokens(sequence.request_id, joined, len(sequence.unsent_stamps), tuple(sequence.unsent_stamps)))
            sequence.unsent, sequence.unsent_stamps = [], []

    def _finish(self, sequence: SequenceState, reason: str) -> None:
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

        now = time.monotonic()
        tail = sequence.decoder.decode(b"", final=True)
        tail = sequence.stops.feed(tail) + sequence.stops.flush() if reason != "stop" or not sequence.stops.stopped else ""
        if tail:
            sequence.pieces.append(tail)
        if self._emit is not None and (sequence.unsent_stamps or tail):
            joined = "".join(sequence.unsent) + tail
            self._emit(SequenceTokens(sequence.request_id, joined, len(sequence.unsent_stamps), tuple(sequence.unsent_stamps)))
        sequence.unsent, sequence.unsent_stamps = [], []
        sequence.stop_reason = reason
        sequence.pending = None
        if sequence.sampler is not None:
            sequence.sampler.free()
            sequence.sampler = None
        if sequence.slot >= 0:
            llama_cpp.llama_memory_seq_rm(self._memory, sequence.slot, -1, -1)
            self._active.pop(sequence.slot, None)
            self._free_slots.append(sequence.slot)
            self._free_slots.sort()
        if sequence in self._admitted_order:
            self._admitted_order.remove(sequence)
        for child in sequence.children:
            if child.parent is sequence:  # the prompt never finished: its forks end with it
                child.parent = None
                child.prefilled = len(child.prompt)
                self._finish_unstarted(child, reason)
        self._report_finished(sequence, now)

    def _finish_unstarted(self, sequence: SequenceState, reason: str) -> None:
        if sequence in self._waiting:
            self._waiting.remove(sequence)
        if sequence.slot in self._active:
            self._finish(sequence, reason)
        else:
            sequence.stop_reason = reason
            self._report_finished(sequence, time.monotonic())

    def _report_finished(self, sequence: SequenceState, now: float) -> None:
        self.finished.append(sequence)
        if self._emit is None:
            return
        started = sequence.started_at or now
        self._emit(SequenceFinished(
            request_id=sequence.request_id,
            slot=sequence.slot,
            text="".join(sequence.pieces),
            stop_reason=sequence.stop_reason,
            prompt_tokens=len(sequence.prompt),
            generated_tokens=sequence.generated,
            logprob_sum=sequence.logprob_sum,
            queued_s=started - sequence.submitted_at,
            ttft_s=(sequence.first_token_at - sequence.submitted_at) if sequence.first_token_at else 0.0,
            submitted_at=sequence.submitted_at,
            started_at=started,
            finished_at=now,
        ))

    def _send(self, event: object) -> None:
        if self._emit is not None:
            self._emit(event)

    def emit(self, event: object) -> None:
        self._send(event)

    def mute_if_unheard(self) -> None:
        """From now on a send that fails (the client went away) is dropped instead of raised."""
        emit = self._emit
        if emit is None:
            return

        def tolerant(event: object) -> None:
            try:
                emit(event)
            except (OSError, ValueError):
                pass

        self._emit = tolerant

    # -- observation ---------------------------------------------------------------------------
    def slot_cells(self, slot: int) -> int:
        """Cells of one sequence, as llama.cpp's memory module reports its positions."""
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

        return max(0, int(llama_cpp.llama_memory_seq_pos_max(self._memory, slot)) + 1)

    @property
    def changed_since_status(self) -> bool:
        return self._status_key() != self._last_status_key

    def _status_key(self) -> tuple:
        return (self.decode_calls, len(self._waiting), tuple(s.request_id for s in self._active.values()))

    def status(self) -> SequencesStatus:
        self._last_status_key = self._status_key()
        now = time.monotonic()
        slots = []
        for slot in range(self.n_slots):
            sequence = self._active.get(slot)
            if sequence is None:
                slots.append(SlotState(slot, None, "idle", 0, 0, 0, None, None))
                continue
            ttft = (sequence.first_token_at - sequence.submitted_at) if sequence.first_token_at else None
            tps = None
            if sequence.first_token_at is not None and sequence.generated > 1 and sequence.last_token_at:
                span = sequence.last_token_at - sequence.first_token_at
                tps = (sequence.generated - 1) / span if span > 0 else None
            slots.append(SlotState(slot, sequence.request_id, sequence.phase, self.slot_cells(slot),
                                   len(sequence.prompt), sequence.generated, ttft, tps))
        return SequencesStatus(
            at=now, slots=tuple(slots), waiting=len(self._waiting), n_ctx=self.n_ctx, slot_ctx=self.slot_ctx,
            kv_cells_used=sum(state.kv_cells for state in slots), decode_calls=self.decode_calls,
            last_batch_tokens=self.last_batch_tokens, last_batch_sequences=self.last_batch_sequences,
            max_batch_sequences=self.max_batch_sequences, tokens_in=self.tokens_in, tokens_out=self.tokens_out,
            llama_seconds=self.llama_seconds,
            decode_steps=tuple(DecodeSteps(n, steps, seconds) for n, (steps, seconds) in sorted(self._decode_steps.items())),
        )

    def clear_cache(self) -> None:
        """Empty every sequence's cells (a chat may have left sequence 0's) and tell llama-cpp-python so."""
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

        llama_cpp.llama_memory_clear(self._memory, True)
        self._llama.n_tokens = 0

    def close(self, reason: str = "cancelled") -> None:
        """End what is left (stop_reason `reason`), free the samplers, the batch and every sequence's cells."""
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

        self.cancel_all(reason)
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        self.clear_cache()
