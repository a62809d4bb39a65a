"""Multi-token-prediction blocks: the last nextn_predict_layers blocks, which llama.cpp's main context does not attend."""

from __future__ import annotations

from workbench.core.gguf.model_info import ModelInfo


def mtp_layers(model: ModelInfo) -> int:
    """The MTP blocks at the end that llama.cpp's main context leaves out of its caches (llama-model.cpp
    create_memory: filter il < n_layer()); 0 where there is no trunk before them, or where graniteswitch
    reuses the key for its router layer, which the trunk attends.

    llama.cpp does not load their weights (load_mtp = false), but with mmap they lie inside the mapped
    range it prefetches, so they count there; without mmap they are never read (mtp_weights_bytes)."""
    value = model.metadata.get(f"{model.architecture}.nextn_predict_layers")
    count = value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
    return count if count < model.n_layer and model.architecture != "graniteswitch" else 0


def block_of(name: str) -> int | None:
    """N of a blk.N.* tensor; None for the tensors outside the repeating blocks."""
    parts = name.split(".")
    return int(parts[1]) if len(parts) > 2 and parts[0] == "blk" and parts[1].isdigit() else None


def in_mtp_block(model: ModelInfo, name: str) -> bool:
    block = block_of(name)
    return block is not None and block >= model.n_layer - mtp_layers(model)
