"""Multi-token-prediction blocks: the last nextn_predict_layers blocks, which llama.cpp's main context does not attend."""

from __future__ import annotations

from workbench.core.gguf.model_info import ModelInfo


def mtp_layers(model: ModelInfo) -> int:
    """The MTP blocks at the end that llama.cpp's main context leaves out of its caches (llama-model.cpp
    create_memory: filter il < n_layer()); 0 where there is no trunk before them, or where graniteswitch
    reuses the key for its router layer, which the trunk attends.

    Their weights stay in the mapped model buffer (llama.cpp skips loading them, load_mtp = false, but they
    lie inside the file's tensor range); the weights line counts them as llama.cpp's buffer does."""
    value = model.metadata.get(f"{model.architecture}.nextn_predict_layers")
    count = value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
    return count if count < model.n_layer and model.architecture != "graniteswitch" else 0
