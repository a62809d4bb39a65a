"""The nodes llama.cpp's own graph computes for one batch, read in this process through its eval callback."""

from __future__ import annotations

import ctypes
from pathlib import Path

import llama_cpp


class _GgmlTensor(ctypes.Structure):
    """struct ggml_tensor (ggml.h of the installed llama.cpp), as far as the name."""

    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16),
                ("flags", ctypes.c_int32), ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64)]


def prompt_nodes(path: Path, n_prompt: int) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of every node llama.cpp computes to decode a prompt of `n_prompt` tokens in one batch,
    asking for the last token's logits only (llama_batch_get_one), as a chat's prompt does."""
    seen: list[tuple[str, tuple[int, ...]]] = []

    @llama_cpp.ggml_backend_sched_eval_callback
    def observe(tensor, ask, _data):
        if not ask:
            node = _GgmlTensor.from_address(tensor)
            seen.append((node.name.decode(errors="replace"), tuple(node.ne)))
        return True  # asked: yes, show this node once computed

    llama_cpp.llama_backend_init()
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), llama_cpp.llama_model_default_params())
    assert model, f"llama.cpp could not load {path}"
    params = llama_cpp.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch, params.cb_eval = 256, n_prompt, n_prompt, observe
    context = llama_cpp.llama_init_from_model(model, params)
    try:
        tokens = (llama_cpp.llama_token * n_prompt)(*range(10, 10 + n_prompt))
        assert llama_cpp.llama_decode(context, llama_cpp.llama_batch_get_one(tokens, n_prompt)) == 0
    finally:
        llama_cpp.llama_free(context)
        llama_cpp.llama_model_free(model)
    return seen
