"""The two ways into the sequence scheduler, inside the engine process.

Independent requests admitted into free slots as they come (continuous batching,
`serve_sequences`), and N samples of one prompt whose KV cells are evaluated once and
shared (`run_samples`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from workbench.core.engine.chat_template import ChatTemplate
from workbench.core.engine.sequence_events import (
    Sample,
    SamplesFinished,
    SequenceCancel,
    SequenceRejected,
    SequenceRequest,
    SequencesClose,
    SequencesClosed,
    SequenceSubmit,
)
from workbench.core.engine.sequence_requests import SequencesUnavailable, request_problem
from workbench.core.engine.sequence_scheduler import SequenceScheduler

# How often a serving session sends SequencesStatus while it decodes.
STATUS_INTERVAL_S = 0.25


def perf_count(count: int, ms: float) -> int:
    """A llama_perf_context token counter as it is: llama.cpp reports max(1, count), so a 1 that took no time is 0."""
    return int(count) if ms > 0 else 0


def run_samples(llama: Any, template: ChatTemplate | None, request: SequenceRequest, n: int,
                cancel_requested: Callable[[], bool]) -> SamplesFinished:
    """N samples of one prompt decoded together; the prompt is evaluated once (sequence 0)."""
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    if not 1 <= n <= 256:
        raise SequencesUnavailable(f"{n} samples: the number of samples must be from 1 to 256 (llama.cpp's LLAMA_MAX_SEQ)")
    problem = request_problem(request)
    if problem:
        raise SequencesUnavailable(problem[1])
    started_at = time.monotonic()
    scheduler = SequenceScheduler(llama, n, llama.n_ctx(), None, template)
    try:
        prompt = scheduler.tokenize(request)
        if not prompt:
            raise SequencesUnavailable("the prompt is empty")
        room = (llama.n_ctx() - len(prompt)) // n
        if room < 1:
            raise SequencesUnavailable(
                f"the prompt takes {len(prompt)} tokens; {n} answers need room beside it in a context of "
                f"{llama.n_ctx()}: shorten the prompt, take fewer samples or load a larger ctx_size")
        wanted = request.max_tokens if request.max_tokens is not None else request.sampling.max_tokens
        max_tokens = min(wanted, room)
        scheduler.clear_cache()
        llama_cpp.llama_perf_context_reset(llama.ctx)
        scheduler.submit_samples(request, prompt, n, max_tokens)
        while scheduler.has_work:
            if cancel_requested():
                scheduler.cancel_all()
                break
            scheduler.step()
        perf = llama_cpp.llama_perf_context(llama.ctx)
        finished_at = time.monotonic()
        by_index = sorted(scheduler.finished, key=lambda s: s.request_id)
        samples = tuple(Sample("".join(s.pieces), s.stop_reason, s.generated, s.logprob_sum) for s in by_index)
        return SamplesFinished(
            samples=samples,
            prompt_tokens=len(prompt),
            max_tokens=max_tokens,
            decode_calls=scheduler.decode_calls,
            max_batch_sequences=scheduler.max_batch_sequences,
            llama_tokens_evaluated=perf_count(perf.n_p_eval, perf.t_p_eval_ms) + perf_count(perf.n_eval, perf.t_eval_ms),
            sampled_tokens_decoded=scheduler.sampled_tokens_decoded,
            llama_eval_s=(perf.t_p_eval_ms + perf.t_eval_ms) / 1000.0,
            prompt_s=(scheduler.prompt_done_at or finished_at) - started_at,
            wall_s=finished_at - started_at,
            started_at=started_at,
            finished_at=finished_at,
        )
    finally:
        scheduler.close()


def serve_sequences(llama: Any, template: ChatTemplate | None, n_slots: int, send: Callable[[object], None],
                    receive: Callable[[], object], poll: Callable[[], bool],
                    cancel_requested: Callable[[], bool]) -> object | None:
    """Continuous batching until the client sends SequencesClose (or its pipe closes).

    Returns a request that ended the session without being a session message (a
    ShutdownRequest from a closing client), for the engine's main loop to handle; else None.

    Between steps the pipe is drained: new requests queue for a slot, cancels free theirs.
    With nothing to do the loop blocks on the pipe, so an idle server costs no CPU.
    """
    scheduler = SequenceScheduler(llama, n_slots, llama.n_ctx() // n_slots, send, template)
    scheduler.clear_cache()
    last_status = 0.0
    error = ""
    try:
        while True:
            while not scheduler.has_work or poll():
                if not scheduler.has_work and scheduler.changed_since_status:
                    send(scheduler.status())  # the idle state (after a cancel too) before waiting
                try:
                    message = receive()
                except (EOFError, OSError):
                    return None
                if isinstance(message, SequencesClose):
                    return None
                if isinstance(message, SequenceSubmit):
                    try:
                        scheduler.submit(message.request_id, message.request)
                    except Exception as failure:  # noqa: BLE001 - one bad request must not end the session
                        send(SequenceRejected(message.request_id, "bad_request", f"the engine could not take it: {failure}"))
                elif isinstance(message, SequenceCancel):
                    scheduler.cancel(message.request_id)
                else:
                    return message  # not a session message (a shutdown): the session ends, the caller handles it
            if cancel_requested():
                return None  # the client's cancel-everything flag (set by close()): the session ends
            scheduler.step()
            now = time.monotonic()
            if now - last_status >= STATUS_INTERVAL_S or not scheduler.has_work:
                send(scheduler.status())
                last_status = now
    except (BrokenPipeError, EOFError):
        return None
    except Exception as failure:  # noqa: BLE001 - reported in SequencesClosed; the engine stays up
        error = f"decoding failed: {failure}"
    finally:
        # The client may be gone: the cells and samplers are freed whether or not it hears of it.
        scheduler.mute_if_unheard()
        scheduler.close("error" if error else "cancelled")
        scheduler.emit(SequencesClosed(scheduler.decode_calls, scheduler.max_batch_sequences, error))
