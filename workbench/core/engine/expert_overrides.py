"""--n-cpu-moe for llama-cpp-python: the routed experts of the first N layers kept in CPU memory.

llama-cpp-python 0.3.36 has no argument for llama_model_params.tensor_buft_overrides (the field is
there, as a void pointer); llama.cpp's common/arg.cpp builds --n-cpu-moe as one override per layer,
each {pattern, ggml_backend_cpu_buffer_type()}, ended by {NULL, NULL}. `Llama.__init__` takes its
model parameters from llama_model_default_params(), so while it runs that function returns them
with the overrides set; the array and its pattern strings live as long as the model (`keep`).
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator
from typing import Any

from workbench.core.config.preset_split import cpu_moe_patterns


class TensorBuftOverride(ctypes.Structure):
    """llama.h struct llama_model_tensor_buft_override."""

    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


def override_array(n_cpu_moe: int) -> tuple[Any, tuple[bytes, ...]]:
    """The NULL-terminated override array for --n-cpu-moe N and the pattern bytes it points into."""
    from llama_cpp import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    cpu_buffer_type = llama_cpp._lib.ggml_backend_cpu_buffer_type  # libggml-base, a dependency of libllama
    cpu_buffer_type.restype, cpu_buffer_type.argtypes = ctypes.c_void_p, []
    buft = cpu_buffer_type()
    patterns = tuple(pattern.encode() for pattern in cpu_moe_patterns(n_cpu_moe))
    array = (TensorBuftOverride * (len(patterns) + 1))()
    for slot, pattern in enumerate(patterns):
        array[slot].pattern, array[slot].buft = pattern, buft
    return array, patterns  # the last slot stays zeroed: {NULL, NULL}


@contextlib.contextmanager
def experts_on_cpu(n_cpu_moe: int, keep: list[object]) -> Iterator[None]:
    """While a Llama is made in this block, its model keeps the experts of layers < n_cpu_moe on the CPU.

    `keep` receives the ctypes objects llama.cpp reads during the load (the caller holds them)."""
    if n_cpu_moe <= 0:
        yield
        return
    from llama_cpp import llama_cpp  # deferred: importing llama_cpp loads the llama.cpp libraries

    array, patterns = override_array(n_cpu_moe)
    keep[:] = [array, patterns]
    original = llama_cpp.llama_model_default_params

    def with_overrides() -> Any:
        params = original()
        params.tensor_buft_overrides = ctypes.addressof(array)
        return params

    llama_cpp.llama_model_default_params = with_overrides
    try:
        yield
    finally:
        llama_cpp.llama_model_default_params = original
