"""The inspect summary of a GGUF model as a Rich table (what `workbench inspect` reports)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from workbench.core.gguf.model_info import ModelInfo
from workbench.core.units import size


def model_summary(model: ModelInfo) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    mix = ", ".join(f"{name} {share:.0%}" for name, share in model.type_mix[:4])
    rows = [
        ("name", model.name or "(unnamed)"),
        ("file", model.source),
        ("architecture", model.architecture),
        ("file type", model.file_type or "not stated in the header"),
        ("parameters", f"{model.n_params / 1e6:,.1f} M"),
        ("file size", size(model.file_size)),
        ("weights", f"{size(model.weights_bytes)} · {model.bits_per_weight:.2f} bits/weight"),
        ("tensor types", mix or "no tensors"),
        ("layers", str(model.n_layer)),
        ("heads / KV heads", f"{model.n_head} / {model.n_head_kv}"),
        ("head dim K / V", f"{model.head_dim_k} / {model.head_dim_v}"),
        ("embedding", str(model.n_embd)),
        ("vocabulary", f"{model.n_vocab:,}"),
        ("trained context", f"{model.n_ctx_train:,}"),
        ("chat template", "yes" if model.has_chat_template else "no: llama.cpp's built-in template if its vocabulary has a family's turn tokens, else completion mode (the load notice says which)"),
        ("GGUF version", str(model.version)),
    ]
    for label, value in rows:
        table.add_row(label, Text(value))
    return table
