"""Measurements run inside the engine process on a loaded llama_cpp.Llama: perplexity, speed, facts."""

from __future__ import annotations

import ctypes
import math
import os
import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from workbench.core.engine.chat_turn import clear_kv_cache
from workbench.core.engine.kld_math import KldAccumulator, KldMeasured, KldReference, compress_log_probs, log_softmax
from workbench.core.engine.measured import (
    PERF_COUNTERS,
    WALL_CLOCK,
    EngineFacts,
    PerplexityMeasured,
    RatesMeasured,
    SpeedMeasured,
)

# llama_cpp and numpy are imported inside the functions: this module is also imported by
# the client process to unpickle results, and that process must never load llama.cpp.


def measure_perplexity(llama: Any, text: str, n_ctx: int | None = None,
                       progress: Callable[[float], None] | None = None) -> PerplexityMeasured:
    """Perplexity of `text`, scored the way llama.cpp's `llama-perplexity` scores a window.

    The text is cut into windows of `n_ctx` tokens that overlap by half. As in llama.cpp, only
    the second half of each window is scored, so every scored token sees at least n_ctx/2 tokens
    of context; the first window is scored from its second token on. With the half overlap,
    every token after the first is scored exactly once, which matters for a short text.
    """
    window, tokens = _window_and_tokens(llama, text, n_ctx)
    started = time.perf_counter()
    total_nll = 0.0
    n_scored = 0
    n_windows = 0
    for window_tokens, wanted, targets in _scored_windows(llama, tokens, window):
        total_nll += _window_nll(llama, window_tokens, wanted, targets)
        n_scored += len(targets)
        n_windows += 1
        if progress is not None:
            progress(n_scored / (len(tokens) - 1))  # every token after the first is scored once
    return PerplexityMeasured(
        ppl=math.exp(total_nll / n_scored),
        n_tokens_scored=n_scored,
        n_tokens_text=len(tokens),
        n_ctx=window,
        n_windows=n_windows,
        seconds=time.perf_counter() - started,
    )


def _window_and_tokens(llama: Any, text: str, n_ctx: int | None, max_scored: int | None = None) -> tuple[int, list[int]]:
    """The checked window length and the text's tokens (cut to `max_scored` + 1 when given)."""
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    context_size = llama_cpp.llama_n_ctx(llama.ctx)
    window = int(n_ctx or context_size)
    if window < 2 or window > context_size:
        raise ValueError(f"perplexity window {window} must be between 2 and the context size {context_size}")
    tokens = list(llama.tokenize(text.encode("utf-8"), add_bos=True, special=False))
    if max_scored is not None:
        tokens = tokens[: max_scored + 1]
    if len(tokens) < 2:
        raise ValueError("the evaluation text is shorter than two tokens")
    return window, tokens


def _scored_windows(llama: Any, tokens: list[int], window: int) -> Iterator[tuple[list[int], range, list[int]]]:
    """(window tokens, positions whose logits score, the target tokens) for each half-overlapping window."""
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    vocab = llama_cpp.llama_model_get_vocab(llama.model)
    bos = llama_cpp.llama_vocab_bos(vocab) if llama_cpp.llama_vocab_get_add_bos(vocab) else None
    half = window // 2
    scored_until = 1  # the next target position not scored yet (token 0 has no prediction)
    start = 0
    while scored_until < len(tokens):
        end = min(start + window, len(tokens))
        window_tokens = tokens[start:end]
        # logits at window position j predict the token at j + 1
        wanted = range(scored_until - start - 1, end - start - 1)
        if bos is not None and start > 0 and wanted.start > 0:
            window_tokens[0] = bos  # llama.cpp starts every window with BOS when the model wants one
        yield window_tokens, wanted, tokens[scored_until:end]
        scored_until = end
        start += half


def _window_nll(llama: Any, window_tokens: Sequence[int], wanted: range, targets: Sequence[int]) -> float:
    """Evaluate one window from an empty cache; sum -log p(target) over the wanted positions."""
    import numpy as np  # deferred: importing numpy costs start-up time

    total = 0.0
    target_index = 0
    for rows in _window_logits(llama, window_tokens, wanted):
        n_out = len(rows)
        rows = rows.astype(np.float64)
        top = rows.max(axis=1)
        log_norm = top + np.log(np.exp(rows - top[:, None]).sum(axis=1))
        chunk_targets = targets[target_index : target_index + n_out]
        total += float((log_norm - rows[np.arange(n_out), chunk_targets]).sum())
        target_index += n_out
    return total


def _window_logits(llama: Any, window_tokens: Sequence[int], wanted: range) -> Iterator[Any]:
    """Evaluate one window from an empty cache; yield the logits rows [n, n_vocab] of the wanted positions.

    Each yielded array is a view of llama.cpp's output buffer: valid until the next decode.
    """
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries
    import numpy as np  # deferred: importing numpy costs start-up time

    ctx = llama.ctx
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(llama.model))
    n_batch = llama_cpp.llama_n_batch(ctx)
    clear_kv_cache(llama)
    wanted_set = set(wanted)
    batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
    try:
        for first in range(0, len(window_tokens), n_batch):
            chunk = window_tokens[first : first + n_batch]
            flags = [first + i in wanted_set for i in range(len(chunk))]
            _fill_batch(batch, chunk, first, flags)
            _decode(ctx, batch)
            n_out = sum(flags)
            if n_out:
                yield np.ctypeslib.as_array(llama_cpp.llama_get_logits(ctx), shape=(n_out, n_vocab))
    finally:
        llama_cpp.llama_batch_free(batch)
        clear_kv_cache(llama)


def kld_reference(llama: Any, text: str, path: str, n_ctx: int | None = None, max_tokens: int | None = None) -> KldReference:
    """Score `text` like the perplexity op and save every scored position's log-probabilities to `path`.

    The file (numpy .npz, no pickles) holds llama.cpp's 16-bit log-probability codes per
    position, the text's tokens and the window, so that `kld` runs the same windows on
    another model and compares distributions position by position.
    """
    import numpy as np  # deferred: importing numpy costs start-up time

    window, tokens = _window_and_tokens(llama, text, n_ctx, max_tokens)
    codes, params, nll = [], [], 0.0
    for window_tokens, wanted, targets in _scored_windows(llama, tokens, window):
        done = 0
        for rows in _window_logits(llama, window_tokens, wanted):
            chunk_targets = targets[done : done + len(rows)]
            nll -= float(log_softmax(rows)[np.arange(len(rows)), chunk_targets].sum())
            chunk_codes, chunk_params = compress_log_probs(rows)
            codes.append(chunk_codes)
            params.append(chunk_params)
            done += len(rows)
    all_codes = np.concatenate(codes)
    partial = f"{path}.part-{os.getpid()}"
    with open(partial, "wb") as handle:
        np.savez(handle, codes=all_codes, params=np.concatenate(params),
                 tokens=np.asarray(tokens, dtype=np.int32), n_ctx=np.asarray([window], dtype=np.int32))
    os.replace(partial, path)
    return KldReference(path=path, n_tokens=len(all_codes), n_vocab=all_codes.shape[1], n_ctx=window,
                        ppl=math.exp(nll / len(all_codes)))


def measure_kld(llama: Any, text: str, reference_path: str) -> KldMeasured:
    """KL divergence of this model's next-token distributions from the reference's, position by position."""
    import numpy as np  # deferred: importing numpy costs start-up time

    with np.load(reference_path, allow_pickle=False) as saved:
        codes, params, ref_tokens = saved["codes"], saved["params"], saved["tokens"]
        window = int(saved["n_ctx"][0])
    if codes.ndim != 2 or codes.dtype != np.uint16 or params.shape != (len(codes), 2) or ref_tokens.ndim != 1:
        raise ValueError(f"{reference_path} is not a reference written by kld_reference")
    window, tokens = _window_and_tokens(llama, text, window, len(ref_tokens) - 1)
    if list(ref_tokens) != tokens:
        raise ValueError("this model tokenizes the evaluation text differently from the reference: "
                         "KL divergence compares the same model at different precisions only")
    started = time.perf_counter()
    total = KldAccumulator.empty()
    position = 0
    for window_tokens, wanted, targets in _scored_windows(llama, tokens, window):
        done = 0
        for rows in _window_logits(llama, window_tokens, wanted):
            n = len(rows)
            if rows.shape[1] != codes.shape[1] or position + n > len(codes):
                raise ValueError(f"the reference holds {len(codes)} positions of {codes.shape[1]} tokens; "
                                 f"this model gives {rows.shape[1]}")
            total.add(rows, codes[position : position + n], params[position : position + n],
                      np.asarray(targets[done : done + n]))
            position += n
            done += n
    return total.result(window, time.perf_counter() - started)


def measure_speed(llama: Any, n_prompt: int = 256, n_gen: int = 128, seed: int = 0) -> SpeedMeasured:
    """llama-bench style: prefill n_prompt seeded random tokens at once, then n_gen greedy decodes.

    Rates come from llama.cpp's perf counters (prompt batches count as prompt eval, single
    tokens as eval) when those counted exactly our tokens, from the wall clock otherwise.
    """
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries
    import numpy as np  # deferred: importing numpy costs start-up time

    ctx = llama.ctx
    if n_prompt < 1 or n_gen < 1:
        raise ValueError("n_prompt and n_gen must both be at least 1")
    context_size = llama_cpp.llama_n_ctx(ctx)
    if n_prompt + n_gen > context_size:
        raise ValueError(f"n_prompt + n_gen = {n_prompt + n_gen} does not fit the context of {context_size} tokens")
    vocab = llama_cpp.llama_model_get_vocab(llama.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    n_batch = llama_cpp.llama_n_batch(ctx)
    rng = random.Random(seed)
    prompt = [rng.randrange(n_vocab) for _ in range(n_prompt)]
    if llama_cpp.llama_vocab_get_add_bos(vocab):
        prompt[0] = llama_cpp.llama_vocab_bos(vocab)  # as llama-bench does

    def next_token() -> int:
        row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))
        return int(row.argmax())

    clear_kv_cache(llama)
    batch = llama_cpp.llama_batch_init(max(n_batch, 1), 0, 1)
    try:
        llama_cpp.llama_perf_context_reset(ctx)
        started_at = time.monotonic()
        t0 = time.perf_counter()
        for first in range(0, n_prompt, n_batch):
            chunk = prompt[first : first + n_batch]
            _fill_batch(batch, chunk, first, [i == len(chunk) - 1 for i in range(len(chunk))])
            _decode(ctx, batch)
        t_prefilled = time.perf_counter()
        token = next_token()
        t_first = time.perf_counter()
        for i in range(n_gen):
            _fill_batch(batch, [token], n_prompt + i, [True])
            _decode(ctx, batch)
            token = next_token()
        t_done = time.perf_counter()
        finished_at = time.monotonic()
        perf = llama_cpp.llama_perf_context(ctx)
    finally:
        llama_cpp.llama_batch_free(batch)
        clear_kv_cache(llama)

    if perf.n_p_eval == n_prompt and perf.n_eval == n_gen and perf.t_p_eval_ms > 0 and perf.t_eval_ms > 0:
        prefill_s, decode_s, source = perf.t_p_eval_ms / 1000, perf.t_eval_ms / 1000, PERF_COUNTERS
    else:  # e.g. a one-token prompt, which llama.cpp counts as a decode
        prefill_s, decode_s, source = t_prefilled - t0, t_done - t_first, WALL_CLOCK
    return SpeedMeasured(
        n_prompt=n_prompt,
        n_gen=n_gen,
        prefill_seconds=prefill_s,
        prefill_tps=n_prompt / prefill_s,
        ttft_seconds=t_first - t0,
        decode_seconds=decode_s,
        decode_tps=n_gen / decode_s,
        timing_source=source,
        started_at=started_at,
        finished_at=finished_at,
    )


def measure_rates(llama: Any, threads: int, depth: int = 0, n_prompt: int = 512, n_gen: int = 32,
                  repeats: int = 2, seed: int = 0) -> RatesMeasured:
    """Prefill `n_prompt` tokens and decode `n_gen` after `depth` cached ones, at `threads` threads.

    The depth is filled untimed; the prompt is timed `repeats` times (its cells removed between
    them) and the best counts; the decodes are timed one by one and the median counts, so a
    burst of another process on a small machine moves neither much.
    """
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    ctx = llama.ctx
    if depth < 0 or n_prompt < 1 or n_gen < 1 or not 1 <= threads <= 4096 or not 1 <= repeats <= 10:
        raise ValueError("depth >= 0, n_prompt >= 1, n_gen >= 1, 1 <= threads <= 4096, 1 <= repeats <= 10")
    if depth + max(n_prompt, n_gen) > llama_cpp.llama_n_ctx(ctx):
        raise ValueError(f"depth + the timed tokens do not fit the context of {llama_cpp.llama_n_ctx(ctx)}")
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(llama.model))
    n_batch = llama_cpp.llama_n_batch(ctx)
    rng = random.Random(seed)
    memory = llama_cpp.llama_get_memory(ctx)
    llama_cpp.llama_set_n_threads(ctx, threads, threads)
    clear_kv_cache(llama)
    batch = llama_cpp.llama_batch_init(max(n_batch, 1), 0, 1)

    def run(first_pos: int, count: int) -> None:
        for first in range(0, count, n_batch):
            chunk = [rng.randrange(n_vocab) for _ in range(min(n_batch, count - first))]
            _fill_batch(batch, chunk, first_pos + first, [i == len(chunk) - 1 for i in range(len(chunk))])
            _decode(ctx, batch)

    try:
        started_at = time.monotonic()
        run(0, depth)
        prefill = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            run(depth, n_prompt)
            prefill.append(time.perf_counter() - t0)
            llama_cpp.llama_memory_seq_rm(memory, 0, depth, -1)
        per_token = []
        for i in range(n_gen):
            t0 = time.perf_counter()
            run(depth + i, 1)
            per_token.append(time.perf_counter() - t0)
        finished_at = time.monotonic()
    finally:
        llama_cpp.llama_batch_free(batch)
        clear_kv_cache(llama)
        llama_cpp.llama_set_n_threads(ctx, llama.n_threads, llama.n_threads_batch)
    per_token.sort()
    return RatesMeasured(threads=threads, depth=depth, n_prompt=n_prompt, prefill_seconds=min(prefill), n_gen=n_gen,
                         decode_seconds_per_token=per_token[len(per_token) // 2], started_at=started_at,
                         finished_at=finished_at, decode_best_seconds_per_token=per_token[0])


def engine_facts(llama: Any) -> EngineFacts:
    """The llama.cpp build and its view of the loaded model (for machine records and bench rows)."""
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    desc = ctypes.create_string_buffer(256)
    llama_cpp.llama_model_desc(llama.model, desc, ctypes.sizeof(desc))
    ctx = llama.ctx
    return EngineFacts(
        llama_cpp_version=str(llama_cpp.__version__),
        system_info=llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(),
        model_type=desc.value.decode("utf-8", "replace"),
        model_size_bytes=int(llama_cpp.llama_model_size(llama.model)),
        model_n_params=int(llama_cpp.llama_model_n_params(llama.model)),
        n_ctx=int(llama_cpp.llama_n_ctx(ctx)),
        n_batch=int(llama_cpp.llama_n_batch(ctx)),
        n_ubatch=int(llama_cpp.llama_n_ubatch(ctx)),
        n_threads=int(llama_cpp.llama_n_threads(ctx)),
        build_commit=build_commit(),
    )


def build_commit() -> str:
    """ggml_commit() of the loaded libggml ("0c1e570-dirty" for llama-cpp-python 0.3.36's vendored tree); ""
    when the library has no such function."""
    from llama_cpp import _ggml  # deferred: importing llama_cpp loads the llama.cpp libraries

    function = getattr(_ggml.libggml, "ggml_commit", None)
    if function is None:
        return ""
    function.restype, function.argtypes = ctypes.c_char_p, []
    return (function() or b"").decode("utf-8", "replace")[:64]


def _fill_batch(batch: Any, tokens: Sequence[int], first_pos: int, want_logits: Sequence[bool]) -> None:
    batch.n_tokens = len(tokens)
    for i, token in enumerate(tokens):
        batch.token[i] = token
        batch.pos[i] = first_pos + i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = 0
        batch.logits[i] = bool(want_logits[i])


def _decode(ctx: Any, batch: Any) -> None:
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    code = llama_cpp.llama_decode(ctx, batch)
    if code != 0:
        raise RuntimeError(f"llama_decode returned {code}")


OPS: dict[str, Callable[..., Any]] = {
    "perplexity": measure_perplexity,
    "bench": measure_speed,
    "rates": measure_rates,
    "system_info": engine_facts,
    "kld_reference": kld_reference,
    "kld": measure_kld,
}
