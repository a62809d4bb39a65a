"""The hyperparameters the ledger uses, read from GGUF metadata and checked against the tensors they describe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.core.errors import GGUFError
from workbench.core.files.safe_paths import is_control_character, printable_text
from workbench.core.gguf import checks as gguf_checks
from workbench.core.gguf.ggml_types import FILE_TYPES
from workbench.core.gguf.header_stream import REDOWNLOAD, HeaderStream
from workbench.core.gguf.model_info import LongArray, LongString, ModelInfo, TensorInfo

# Hyperparameters that must be counts when present (suffixes after "{arch}.").
_COUNT_SUFFIXES = ("block_count", "embedding_length", "context_length", "vocab_size",
                   "attention.key_length", "attention.value_length")


def must_be_count(key: str) -> bool:
    return key in ("general.alignment", "general.file_type") or key.endswith(_COUNT_SUFFIXES)


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _count_value(value: Any) -> int:
    """A hyperparameter that is a scalar or a per-layer array, as its largest value."""
    if isinstance(value, tuple):
        numbers = [v for v in value if is_count(v)]
        return max(numbers) if numbers else 0
    return value if is_count(value) else 0


def model_info_from_header(name: str, reader: HeaderStream, version: int, metadata: dict[str, Any], tensors: tuple[TensorInfo, ...]) -> ModelInfo:
    """The hyperparameters the ledger uses, each checked against the tensors it describes (gguf_checks)."""
    arch = metadata.get("general.architecture")
    arch = arch if isinstance(arch, str) else ""
    if any(map(is_control_character, arch)):  # printed in every message about the model
        raise GGUFError(f"general.architecture {printable_text(arch)[:80]!r} contains a control character", where=name,
                        fix=REDOWNLOAD)

    def hparam(suffix: str) -> Any:
        return metadata.get(f"{arch}.{suffix}") if arch else None

    n_layer = _count_value(hparam("block_count"))
    split_count = metadata.get("split.count")
    split_part = is_count(split_count) and split_count > 1  # one part of a split model holds some layers
    gguf_checks.check_layer_count(arch, n_layer, tensors, name, split_part=split_part)
    for suffix in ("attention.head_count", "attention.head_count_kv", "feed_forward_length"):
        if hparam(suffix) is not None:
            gguf_checks.check_per_layer_array(f"{arch}.{suffix}", hparam(suffix), n_layer, name)
    n_embd = _count_value(hparam("embedding_length"))
    head_count = hparam("attention.head_count")
    head_per_layer = head_count if isinstance(head_count, tuple) else ()
    n_head = _count_value(head_count)
    head_count_kv = hparam("attention.head_count_kv")
    per_layer: tuple[int, ...] = ()
    if isinstance(head_count_kv, tuple):
        per_layer = head_count_kv
        n_head_kv = max(per_layer, default=0)
    elif head_count_kv is None:
        n_head_kv = n_head  # llama.cpp's default: no grouped-query attention
        per_layer = head_per_layer
    else:
        n_head_kv = _count_value(head_count_kv)
    default_head_dim = n_embd // n_head if n_head else 0  # llama.cpp: n_embd / n_head(), rounded down
    key_length, value_length = hparam("attention.key_length"), hparam("attention.value_length")
    head_dim_k = key_length if is_count(key_length) else default_head_dim
    head_dim_v = value_length if is_count(value_length) else default_head_dim
    key_length_swa, value_length_swa = hparam("attention.key_length_swa"), hparam("attention.value_length_swa")
    gguf_checks.check_attention(gguf_checks.AttentionShape(
        arch=arch, n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_head_per_layer=head_per_layer,
        n_head_kv=n_head_kv, n_head_kv_per_layer=per_layer, head_dim_k=head_dim_k, head_dim_v=head_dim_v,
        head_dim_k_swa=key_length_swa if is_count(key_length_swa) else None,
        head_dim_v_swa=value_length_swa if is_count(value_length_swa) else None,
        key_length_given=is_count(key_length), value_length_given=is_count(value_length),
        head_count_kv_given=head_count_kv is not None,
    ), tensors, metadata, name)

    tokens = metadata.get("tokenizer.ggml.tokens")
    if isinstance(tokens, (tuple, LongArray)):
        n_vocab, vocab_source = len(tokens), "tokenizer.ggml.tokens"
    elif hparam("vocab_size") is not None:
        n_vocab, vocab_source = _count_value(hparam("vocab_size")), f"{arch}.vocab_size"
    else:  # no vocabulary in the header: the token embedding's rows are the tokens (as llama.cpp sizes it)
        n_vocab, vocab_source = gguf_checks.embedding_rows(tensors), "token_embd.weight"
    gguf_checks.check_vocabulary(arch, n_vocab, n_embd, tensors, name, vocab_source)
    file_type_id = metadata.get("general.file_type")
    file_type = FILE_TYPES.get(file_type_id) if is_count(file_type_id) else None
    model_name = metadata.get("general.name")
    if not isinstance(model_name, str) or not model_name.strip():
        model_name = Path(name).stem
    # Only ever shown (CLI, app, messages): an ESC or C1 control in it would drive the user's terminal.
    model_name = printable_text(model_name)
    return ModelInfo(
        source=name,
        file_size=reader.file_size,
        version=version,
        architecture=arch,
        name=model_name,
        file_type=file_type,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim_k=head_dim_k,
        head_dim_v=head_dim_v,
        n_vocab=n_vocab,
        n_ctx_train=_count_value(hparam("context_length")),
        has_chat_template=isinstance(metadata.get("tokenizer.chat_template"), (str, LongString)),
        tensors=tensors,
        n_head_kv_per_layer=per_layer,
        metadata=metadata,
        header_bytes=reader.bytes_fetched,
    )
