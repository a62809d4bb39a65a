"""Give the engine's one llama.cpp context room for N sequences (re-created in place; the model stays)."""

from __future__ import annotations

from typing import Any


def context_sequences(llama: Any) -> tuple[int, bool]:
    """(llama_n_seq_max, kv_unified) of the Llama's context."""
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    return int(llama_cpp.llama_n_seq_max(llama.ctx)), bool(llama.context_params.kv_unified)


def ensure_sequences(llama: Any, n_sequences: int) -> bool:
    """Re-create `llama`'s context with n_seq_max >= n_sequences, kv_unified; True if it was re-created.

    llama-cpp-python's Llama has no n_seq_max argument, so the context it made (n_seq_max 1)
    is freed and a new one is made from the same parameters with more sequences. kv_unified
    (llama-server's default with several slots): all sequences share the n_ctx cells, so one
    sequence may still use the whole context, and copying a prompt to other sequences
    (llama_memory_seq_cp) only tags its cells instead of copying them. Without it each
    sequence would get n_ctx / n_seq_max cells in a stream of its own.
    The old context is freed before the new one is allocated, so memory does not peak at two.
    """
    import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries
    from llama_cpp import _internals  # deferred: importing llama_cpp loads the llama.cpp libraries

    n_seq_max, unified = context_sequences(llama)
    if n_seq_max >= n_sequences and (unified or n_seq_max == 1 and n_sequences == 1):
        return False
    params = type(llama.context_params).from_buffer_copy(llama.context_params)
    params.n_seq_max = max(n_sequences, n_seq_max)
    params.kv_unified = True
    llama._ctx.close()  # idempotent: Llama.close() calling it again later does nothing
    try:
        llama._ctx = _internals.LlamaContext(model=llama._model, params=params, verbose=False)
    except Exception:
        # Leave a usable engine: the context it had, as it was.
        llama._ctx = _internals.LlamaContext(model=llama._model, params=llama.context_params, verbose=False)
        raise
    llama.context_params = params
    llama.n_tokens = 0  # the new context's cache is empty; llama-cpp-python must not reuse a prefix
    if llama_cpp.llama_n_seq_max(llama.ctx) < n_sequences:
        raise RuntimeError(f"llama.cpp gave {llama_cpp.llama_n_seq_max(llama.ctx)} sequences, {n_sequences} were asked")
    return True
