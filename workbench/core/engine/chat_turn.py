"""One chat turn inside the engine process: fit, prefill (cancellable), decode, measure."""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workbench.core.engine.chat_template import ChatTemplate
from workbench.core.engine.context_fit import fit_conversation
from workbench.core.engine.events import ContextShifted, PrefillProgressed, TokenChunk, TurnFinished
from workbench.core.engine.protocol import ChatRequest

# Tokens kept free for the answer when deciding whether old turns must go: the answer's
# max_tokens, but never more than a quarter of the context (a 512-token answer budget on a
# 512-token context would otherwise drop every turn).
RESERVE_FRACTION = 4


# Tokens are sent at most this often (the first one at once). Each send wakes the client;
# measured on a busy 2-core machine, a wake-up per token cost the engine ~0.3 ms per token
# of being preempted and queued behind other work, next to ~0.03 ms for the send itself.
# 50 ms is half the app's redraw batching (100 ms), so a display sees no difference.
TOKEN_SEND_INTERVAL_S = 0.05

# stop_reason when the model wrote one of its template's turn markers as text instead of
# ending the turn with an end-of-generation token (a template its training never saw).
TEMPLATE_MARKER_STOP = "template marker"


class _MarkerWatch:
    """Watches generated text for the template's turn markers (which may arrive split over tokens)."""

    def __init__(self, markers: tuple[str, ...], marker_ids: frozenset[int]) -> None:
        self._markers = markers
        self._ids = marker_ids  # markers that are one control token (detokenized as "" otherwise)
        self._tail = ""
        self._longest = max((len(m) for m in markers), default=0)

    def hit(self, token: int, text: str) -> bool:
        if token in self._ids:
            return True
        if not self._markers:
            return False
        self._tail = (self._tail + text)[-2 * self._longest:]
        return any(marker in self._tail for marker in self._markers)

    def cut(self, text: str) -> str:
        """`text` up to the first marker."""
        return text[: min((i for i in (text.find(m) for m in self._markers) if i >= 0), default=len(text))]


class _TokenSender:
    """Groups generated tokens into TokenChunks, keeping every token's engine timestamp."""

    def __init__(self, send: Callable[[object], None]) -> None:
        self._send = send
        self._texts: list[str] = []
        self._stamps: list[float] = []
        self._last_sent_at: float | None = None

    def add(self, text: str, stamp: float) -> None:
        self._texts.append(text)
        self._stamps.append(stamp)
        if self._last_sent_at is None or stamp - self._last_sent_at >= TOKEN_SEND_INTERVAL_S:
            self.flush()

    def flush(self, tail: str = "") -> None:
        """Send what is pending; `tail` is text without a token of its own (a decoder's leftovers)."""
        text = "".join(self._texts) + tail
        if not self._stamps and not text:
            return
        stamp = self._stamps[-1] if self._stamps else time.monotonic()
        self._send(TokenChunk(text, len(self._stamps), stamp, tuple(self._stamps)))
        self._texts, self._stamps = [], []
        self._last_sent_at = stamp


@dataclass(frozen=True)
class _PerfSnapshot:
    eval_ms: float  # prompt eval + eval: llama.cpp books a batch by its size, not its purpose

    @staticmethod
    def take(llama: Any) -> "_PerfSnapshot":
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

        data = llama_cpp.llama_perf_context(llama.ctx)
        return _PerfSnapshot(data.t_p_eval_ms + data.t_eval_ms)


def common_prefix_length(cached: Any, prompt: list[int]) -> int:
    """How many leading prompt tokens already sit in the KV cache (llama.input_ids[:n_tokens])."""
    import numpy as np  # deferred: importing numpy costs start-up time

    length = min(len(cached), len(prompt))
    differs = np.flatnonzero(np.asarray(cached[:length]) != np.asarray(prompt[:length], dtype=np.intc))
    return int(differs[0]) if differs.size else length


def kv_cells_used(llama: Any) -> int:
    """Cells of sequence 0 in llama.cpp's memory module (its own count, not our bookkeeping)."""
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    memory = llama_cpp.llama_get_memory(llama.ctx)
    if memory is None:
        return llama.n_tokens
    return max(0, int(llama_cpp.llama_memory_seq_pos_max(memory, 0)) + 1)


def clear_kv_cache(llama: Any) -> None:
    """Empty the KV cache and tell the Llama object so, so its next eval starts from scratch."""
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    memory = llama_cpp.llama_get_memory(llama.ctx)
    if memory is not None:
        llama_cpp.llama_memory_clear(memory, True)
    llama.reset()


class ChatTurn:
    """Runs one ChatRequest on a loaded Llama and emits its events through `send`."""

    def __init__(
        self,
        llama: Any,
        template: ChatTemplate,
        cancel_requested: Callable[[], bool],
        send: Callable[[object], None],
        draft_counter: Any | None = None,
        previously_dropped: tuple[Any, ...] = (),
    ) -> None:
        self._previously_dropped = previously_dropped
        self.dropped: tuple[Any, ...] = ()  # the messages this turn left out, for the next turn
        self._llama = llama
        self._template = template
        self._cancel_requested = cancel_requested
        self._send = send
        self._draft_counter = draft_counter

    def run(self, request: ChatRequest, started_at: float) -> TurnFinished:
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

        llama = self._llama
        sampling = request.sampling
        n_ctx = llama.n_ctx()
        reserve = max(1, min(sampling.max_tokens, n_ctx // RESERVE_FRACTION))
        fitted = fit_conversation(
            request.messages, self._template.tokenize, n_ctx, reserve, previously_dropped=self._previously_dropped
        )
        self.dropped = fitted.dropped
        if fitted.shifted_now:
            # Totals: every turn now outside the context, not just the ones dropped this time.
            self._send(ContextShifted(fitted.turns_dropped, fitted.tokens_dropped))
        prompt = list(fitted.prompt_tokens)

        # Reuse what the KV cache already holds; at least one token is evaluated so that
        # fresh logits exist to sample from.
        reused = min(common_prefix_length(llama.input_ids[: llama.n_tokens], prompt), len(prompt) - 1)
        llama_cpp.llama_perf_context_reset(llama.ctx)
        prefill_done = self._prefill(prompt, reused)
        if not prefill_done:
            return self._finished("", "cancelled", fitted, len(prompt), reused, 0, started_at, None, None, None)

        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        sender = _TokenSender(self._send)
        eog = _eog_checker(llama)
        markers = _MarkerWatch(self._template.markers, self._template.marker_ids)
        pieces: list[str] = []
        generated = 0
        first_token_at: float | None = None
        after_prefill: _PerfSnapshot | None = None
        stop_reason = "stop"
        logits_finite = True
        proposed_before = self._draft_counter.proposed if self._draft_counter else 0
        accepted = 0
        seed = sampling.seed if sampling.seed >= 0 else llama_cpp.LLAMA_DEFAULT_SEED
        llama.set_seed(seed)
        tokens = llama.generate(
            prompt,
            top_k=sampling.top_k,
            top_p=sampling.top_p,
            min_p=sampling.min_p,
            temp=sampling.temperature,
            repeat_penalty=sampling.repeat_penalty,
        )
        try:
            for token in tokens:
                now = time.monotonic()
                if first_token_at is None:
                    first_token_at = now
                    # Sampling the first token synchronised the last prefill batch, so
                    # llama.cpp's counters now hold exactly the prefill.
                    after_prefill = _PerfSnapshot.take(llama)
                    logits_finite = last_logits_finite(llama)  # before the next eval replaces them
                if eog(token):
                    break
                position = len(prompt) + generated
                if position < llama.n_tokens and llama.input_ids[position] == token:
                    accepted += 1  # a prompt-lookup draft token the model agreed with
                generated += 1
                text = decoder.decode(llama.detokenize([token]))
                pieces.append(text)
                sender.add(text, now)
                if markers.hit(token, text):
                    stop_reason = TEMPLATE_MARKER_STOP  # the model wrote a turn marker, not its end token
                    break
                if self._cancel_requested():
                    stop_reason = "cancelled"
                    break
                if generated >= sampling.max_tokens or len(prompt) + generated >= n_ctx:
                    stop_reason = "length"
                    break
        finally:
            tokens.close()
        tail = decoder.decode(b"", final=True)
        pieces.append(tail)
        sender.flush(tail)
        proposed = (self._draft_counter.proposed - proposed_before) if self._draft_counter else 0
        text = markers.cut("".join(pieces)) if stop_reason == TEMPLATE_MARKER_STOP else "".join(pieces)
        return self._finished(
            text, stop_reason, fitted, len(prompt), reused, generated, started_at,
            first_token_at, after_prefill, (accepted, proposed),
            answer_note=answer_note(generated, stop_reason, logits_finite),
        )

    def _prefill(self, prompt: list[int], reused: int) -> bool:
        """Evaluate the prompt after the reused prefix; False when cancelled on the way.

        llama.cpp checks the abort callback between graph nodes, so a cancel lands inside a
        batch instead of after it; the callback is installed for prefill only, where a call
        per node costs nothing next to a batch's matrix products.
        """
        import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

        llama = self._llama
        llama.n_tokens = reused  # Llama.eval drops KV cells past n_tokens before decoding
        pending = prompt[reused:]
        abort = llama_cpp.ggml_abort_callback(lambda _data: self._cancel_requested())
        llama_cpp.llama_set_abort_callback(llama.ctx, abort, None)
        # a prompt of several batches (a long history after a reload) takes seconds on a small board:
        # progress after each batch, so the UI shows it instead of a blank answer
        reports = len(pending) > llama.n_batch
        if reports:
            self._send(PrefillProgressed(0, len(pending)))
        try:
            for start in range(0, len(pending), llama.n_batch):
                if self._cancel_requested():
                    return False
                try:
                    llama.eval(pending[start : start + llama.n_batch])
                except RuntimeError:
                    if self._cancel_requested():
                        return False  # llama_decode returned 2: aborted, its ubatch rolled back
                    raise
                if reports:
                    self._send(PrefillProgressed(min(start + llama.n_batch, len(pending)), len(pending)))
        finally:
            llama_cpp.llama_set_abort_callback(llama.ctx, llama_cpp.ggml_abort_callback(), None)
        return not self._cancel_requested()

    def _finished(
        self, text: str, stop_reason: str, fitted: Any, prompt_tokens: int, reused: int, generated: int,
        started_at: float, first_token_at: float | None, after_prefill: _PerfSnapshot | None,
        drafts: tuple[int, int] | None, *, answer_note: str = "",
    ) -> TurnFinished:
        llama = self._llama
        finished_at = time.monotonic()
        evaluated = prompt_tokens - reused
        prefill_s = decode_s = 0.0
        if after_prefill is not None:
            prefill_s = after_prefill.eval_ms / 1000.0
            decode_s = max(0.0, (_PerfSnapshot.take(llama).eval_ms - after_prefill.eval_ms) / 1000.0)
        # The first generated token comes from the prefill's logits; each later one costs an eval.
        decode_evals = max(0, generated - 1)
        accepted, proposed = drafts or (0, 0)
        return TurnFinished(
            text=text,
            stop_reason=stop_reason,
            prompt_tokens=prompt_tokens,
            reused_tokens=reused,
            generated_tokens=generated,
            ttft_s=(first_token_at - started_at) if first_token_at is not None else 0.0,
            prefill_tps=evaluated / prefill_s if prefill_s > 0 else 0.0,
            decode_tps=decode_evals / decode_s if decode_s > 0 else 0.0,
            kv_cells_used=kv_cells_used(llama),
            n_ctx=llama.n_ctx(),
            context_shifts=fitted.turns_dropped,
            started_at=started_at,
            finished_at=finished_at,
            draft_accepted=accepted,
            draft_proposed=proposed,
            prefill_s=prefill_s,
            decode_s=decode_s,
            answer_note=answer_note,
        )


NOT_FINITE = "the logits were not finite (NaN/Inf): the weights are probably corrupt"


def answer_note(generated: int, stop_reason: str, logits_finite: bool) -> str:
    """Why an answer is empty, or that it is noise; "" for an ordinary answer.

    A model that ends its answer at once, and a model whose weights are corrupt (NaN logits
    make every sampler's choice arbitrary, often an end token), look alike to the user: an
    empty answer with no hint. The first token's logits tell them apart.
    """
    if generated == 0 and stop_reason == "stop":
        return f"empty answer: {NOT_FINITE}" if not logits_finite else "empty answer: the first token was end-of-generation"
    if not logits_finite:
        return f"{NOT_FINITE}; the answer is noise"
    return ""


def last_logits_finite(llama: Any) -> bool:
    """Whether the logits the last token was sampled from are all finite (llama.cpp's own buffer, read in place)."""
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries
    import numpy as np  # deferred: importing numpy costs start-up time

    pointer = llama_cpp.llama_get_logits_ith(llama.ctx, -1)
    if not pointer:
        return True  # no logits to judge
    return bool(np.isfinite(np.ctypeslib.as_array(pointer, shape=(llama.n_vocab(),))).all())


def _eog_checker(llama: Any) -> Callable[[int], bool]:
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    vocab = llama_cpp.llama_model_get_vocab(llama.model)
    return lambda token: bool(llama_cpp.llama_vocab_is_eog(vocab, token))
