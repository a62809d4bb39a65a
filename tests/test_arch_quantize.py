"""Weight re-quantization prediction on mixture-of-experts models: the 3-D expert tensors, against llama.cpp's own quantizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from arch_models import arch_model, write_arch_gguf
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.predict import predicted_weights_bytes

# LLAMA_FTYPE_MOSTLY_* numbers (llama.h)
FTYPES = {"Q8_0": 7, "Q4_K_M": 15, "Q5_K_M": 17, "Q4_0": 2}


def _quantize(source: Path, out: Path, weights: str) -> Path:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[weights]
    params.nthread = 1
    assert llama_cpp.llama_model_quantize(str(source).encode(), str(out).encode(), params) == 0
    return out


@pytest.mark.parametrize("arch", ["olmoe", "qwen2moe", "qwen3moe"])
def test_expert_tensors_requantize_as_llama_cpp_does(tmp_path: Path, arch: str):
    # n_embd and expert n_ff of 256: whole K-quant rows, so the mixes' per-tensor choices show
    model = arch_model(arch, weight_type="F16", n_embd=256, n_head=4, n_head_kv=4 if arch == "olmoe" else 2,
                       n_ff=256 if arch == "olmoe" else 384, n_ff_expert=256, n_vocab=2048)
    source = write_arch_gguf(tmp_path / f"{arch}-f16.gguf", model)
    info = read_gguf(source)
    assert any(len(t.shape) == 3 for t in info.tensors)  # [n_embd, n_ff, n_expert] expert tensors
    for weights in FTYPES:
        quantized = read_gguf(_quantize(source, tmp_path / f"{arch}-{weights}.gguf", weights))
        assert predicted_weights_bytes(info, weights) == quantized.weights_bytes, weights
