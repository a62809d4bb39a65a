"""Random-weight llama GGUFs the device probe times: tiny ones for the fixed costs, wide ones for each weight type's rates."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from workbench.core.gguf.ggml_types import GGML_TYPES_BY_NAME

N_VOCAB = 512  # SentencePiece: <unk> <s> </s>, 256 byte tokens, filler pieces
# The blocks' fp16 scales, log-uniform over two binades: most of a SmolLM2-135M Q4_1 tensor's 500-1,300
# distinct scales lie within two binades (of 0.006-0.5 in all); these smaller ones keep random weights'
# activations finite.
SCALE_RANGE = (0.005, 0.02)
HEAD_DIM = 64


@dataclass(frozen=True)
class ProbeModel:
    """One probe model's shape: every matrix of one weight type."""

    name: str
    n_layer: int
    n_embd: int
    n_ff: int
    weight_type: str
    kv_heads: int = 0  # 0: as many as query heads
    n_vocab: int = N_VOCAB
    tied: bool = False  # no output.weight: the token embedding is the output matrix as well
    mapped: bool = True  # loaded with mmap; False: read into memory llama.cpp allocates (mmap off)
    file: str = ""  # the probe model whose file this one loads ("": its own)

    @property
    def file_name(self) -> str:
        return self.file or self.name

    @property
    def n_head(self) -> int:
        return max(1, self.n_embd // HEAD_DIM)

    @property
    def n_head_kv(self) -> int:
        return self.kv_heads or self.n_head


# Two tiny models that differ only in depth: their difference is the cost of a layer, the rest
# is the cost of a token. Their weights are a few kB, so neither reads memory to speak of.
FIXED_COST_MODELS = (ProbeModel("probe-fixed-2", 2, 64, 128, "Q8_0"), ProbeModel("probe-fixed-16", 16, 64, 128, "Q8_0"))
# Wide models, one per weight type that real files are made of: 8 layers of 512 x 2048 (33.6M weights,
# 19-36 MB). Their prompts give each type's prefill FLOP/s (compute: where the weights sit matters little).
RATE_TYPES = ("Q8_0", "Q4_1", "Q4_K", "Q6_K")
RATE_MODELS = tuple(ProbeModel(f"probe-rate-{kind.lower()}", 8, 512, 2048, kind) for kind in RATE_TYPES)
# Decode's memory read rate needs weights the last-level cache cannot hold: the read models are as
# wide as the rate models and deep enough for READ_CACHE_MULTIPLE x the cache, never under READ_FLOOR_MB
# (fixed costs would show) nor over READ_CAP_MB or READ_RAM_SHARE of the RAM (a small board).
READ_CACHE_MULTIPLE = 4
READ_FLOOR_MB, READ_CAP_MB, READ_UNKNOWN_CACHE_MB = 64.0, 1024.0, 256.0
READ_RAM_SHARE = 1 / 8
# They attend with one KV head, as grouped-query models do: the few KV bytes a token reads keep their
# decode a measure of the weights (with a KV head per query head the KV of 256 cells was a fifth of it).
READ_KV_HEADS = 1
_LAYER_WEIGHTS = 2 * 512 * 512 + 2 * 512 * READ_KV_HEADS * 64 + 3 * 512 * 2048


def read_model_mb(cache_mb: float, ram_mb: float, multiple: float = READ_CACHE_MULTIPLE) -> float:
    """The size the read models (or, with its `multiple`, the rows model) are written at for this cache and RAM (MB)."""
    target = max(multiple * cache_mb, READ_FLOOR_MB) if cache_mb > 0 else READ_UNKNOWN_CACHE_MB
    cap = min(READ_CAP_MB, ram_mb * READ_RAM_SHARE) if ram_mb > 0 else READ_CAP_MB
    return max(1.0, min(target, cap))


def read_models(cache_mb: float, ram_mb: float) -> tuple[ProbeModel, ...]:
    """One read model per RATE_TYPES type, each of at least read_model_mb(cache_mb, ram_mb) of weights."""
    target_bytes = read_model_mb(cache_mb, ram_mb) * 1e6
    models = []
    for kind in RATE_TYPES:
        layer_bytes = _LAYER_WEIGHTS * GGML_TYPES_BY_NAME[kind].bits_per_weight / 8
        models.append(ProbeModel(f"probe-read-{kind.lower()}", max(1, -int(-target_bytes // layer_bytes)), 512, 2048,
                                 kind, kv_heads=READ_KV_HEADS))
    return tuple(models)


def unmapped_model(read: ProbeModel) -> ProbeModel:
    """`read`'s file loaded without mmap: llama.cpp reads it into memory of its own, as with mmap off and on an
    RPC node. Timed beside the mapped model, alternately: a fresh file's mapped pages decoded 1.3-1.5x faster
    at 1 thread here than the same weights in llama.cpp's own memory (1.0-1.3x at 2 threads)."""
    return replace(read, name=f"{read.name}-unmapped", mapped=False, file=read.name)


# The rows model: Q8_0 weights in rows of 128 (the read models' are 512 and 2048 long): with threads a
# mat-vec costs per row as well as per byte (they take its 64-row chunks from one shared counter; at 2
# threads here a 128-wide 262,144-row output matrix decoded slower than at 1), and the two models together
# tell the two apart. Its rows are a vocabulary's, in one tied output matrix of ROWS_CACHE_MULTIPLE x the
# cache, as a real file's largest short-row matrix is; its one layer is tiny. Built from a feed-forward
# instead (one layer of 128 x 328,448), a third of its bytes sat in 128 rows of 328,448: in three runs
# each probing with both at 2 threads, gemma3's tiny file (a 262,144 x 128 output matrix) then decoded at
# 0.87-1.33x its prediction and the bundled model at 0.74-0.82x, against 0.95-1.24x and 0.80-1.16x with
# this model (nearer 1 in 5 of the 6 pairs).
ROWS_EMBD = 128
ROWS_CACHE_MULTIPLE = 2  # a 492,800-token vocabulary here: writing it and loading it three times takes 5 s
ROWS_VOCAB_MULTIPLE = 256  # whole 64-row chunks
# Writing a vocabulary and loading it three times takes about 1.1 s per 100,000 tokens here: 2^20 tokens
# (143 MB) take 12 s of the probe's minute. A cache of over twice that holds the model: no row cost is fitted.
ROWS_VOCAB_CAP = 1 << 20


def rows_model(cache_mb: float, ram_mb: float) -> ProbeModel:
    row_bytes = ROWS_EMBD * GGML_TYPES_BY_NAME["Q8_0"].bits_per_weight / 8
    units = -int(-read_model_mb(cache_mb, ram_mb, ROWS_CACHE_MULTIPLE) * 1e6 // (row_bytes * ROWS_VOCAB_MULTIPLE))
    return ProbeModel("probe-rows-q8_0", 1, ROWS_EMBD, ROWS_EMBD, "Q8_0",
                      n_vocab=min(max(2, units) * ROWS_VOCAB_MULTIPLE, ROWS_VOCAB_CAP), tied=True)


# A Q8_0 model of 4 MB: where the last-level cache holds it, decode reads it from there (small models do).
CACHED_MODEL = ProbeModel("probe-cached-q8_0", 8, 256, 256, "Q8_0")


def _tensor(writer, name: str, kind: str, shape: tuple[int, ...], rng) -> None:
    import gguf  # deferred: importing gguf loads numpy
    import numpy as np  # deferred: importing numpy costs start-up time

    numpy_shape = tuple(reversed(shape))
    if kind == "F32":
        writer.add_tensor(name, rng.standard_normal(numpy_shape, dtype=np.float32))
        return
    qtype = gguf.GGMLQuantizationType[kind]
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(shape[0] // block * int(np.prod(shape[1:])), size), dtype=np.uint8)
    set_block_scales(blocks, kind, rng)
    byte_shape = numpy_shape[:-1] + (numpy_shape[-1] // block * size,)
    writer.add_tensor(name, blocks.reshape(byte_shape), raw_dtype=qtype)


def set_block_scales(blocks, kind: str, rng) -> None:
    """Give random quant blocks (one a row of `blocks`, uint8) small fp16 scales, as varied as a real file's:
    finite activations, and the CPU kernels' fp16 lookups (ggml's x86 build reads each block's scales
    through a 256 KB table) spread as a real file spreads them. One repeated scale kept them in L1: the
    bundled model's Q4_1 dot products then ran 60% slower than a random model's of the same shapes."""
    import numpy as np  # deferred: importing numpy costs start-up time

    low, high = np.log(SCALE_RANGE[0]), np.log(SCALE_RANGE[1])
    scales = np.exp(rng.uniform(low, high, len(blocks))).astype(np.float16)
    if kind == "Q6_K":
        blocks[:, -2:] = scales.view(np.uint8).reshape(-1, 2)
        return
    blocks[:, 0:2] = scales.view(np.uint8).reshape(-1, 2)
    # The second fp16 centres the quants on zero: Q4_1 / Q5_1 add their minimum, Q4_K subtracts dmin x m.
    centre = {"Q4_1": -8.0, "Q5_1": -16.0, "Q4_K": 1.0}.get(kind)
    if centre is not None:
        blocks[:, 2:4] = (centre * scales).astype(np.float16).view(np.uint8).reshape(-1, 2)


def write_probe_model(path: Path, model: ProbeModel, *, seed: int = 0) -> Path:
    """Write `model` as a llama GGUF that llama.cpp loads (the text it makes is noise) and return the path."""
    import gguf  # deferred: importing gguf loads numpy
    import numpy as np  # deferred: importing numpy costs start-up time

    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_name(model.name)
    writer.add_block_count(model.n_layer)
    writer.add_embedding_length(model.n_embd)
    writer.add_feed_forward_length(model.n_ff)
    writer.add_head_count(model.n_head)
    writer.add_head_count_kv(model.n_head_kv)
    writer.add_rope_dimension_count(HEAD_DIM)
    writer.add_context_length(4096)
    writer.add_layer_norm_rms_eps(1e-5)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{byte:02X}>" for byte in range(256)]
    tokens += [f"\u2581p{i}" for i in range(model.n_vocab - len(tokens))]
    types = [2, 3, 3] + [6] * 256 + [1] * (model.n_vocab - 259)  # unknown, control, byte, normal
    write_llama_vocabulary(writer, tokens, types)
    kind, embd, ff = model.weight_type, model.n_embd, model.n_ff
    kv_width = model.n_head_kv * HEAD_DIM if model.n_embd >= HEAD_DIM else embd
    _tensor(writer, "token_embd.weight", "Q8_0", (embd, model.n_vocab), rng)
    for layer in range(model.n_layer):
        prefix = f"blk.{layer}."
        _tensor(writer, prefix + "attn_norm.weight", "F32", (embd,), rng)
        for role, width in (("attn_q", embd), ("attn_k", kv_width), ("attn_v", kv_width), ("attn_output", embd)):
            _tensor(writer, prefix + role + ".weight", kind, (embd, width), rng)
        _tensor(writer, prefix + "ffn_norm.weight", "F32", (embd,), rng)
        _tensor(writer, prefix + "ffn_gate.weight", kind, (embd, ff), rng)
        _tensor(writer, prefix + "ffn_up.weight", kind, (embd, ff), rng)
        _tensor(writer, prefix + "ffn_down.weight", kind, (ff, embd), rng)
    _tensor(writer, "output_norm.weight", "F32", (embd,), rng)
    if not model.tied:
        _tensor(writer, "output.weight", "Q8_0", (embd, model.n_vocab), rng)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return written_back(path)


def written_back(path: Path) -> Path:
    """`path` once the kernel has written it to disk: timed while still being written back, a model
    written a moment before decoded 25-40% slower here for the first minute."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def fresh_copy(source: Path, folder: Path) -> Path:
    """A copy of `source` in `folder`, written back: a file new in the page cache, as the probe's models are.
    On this virtual machine a file whose page-cache pages had sat there for days decoded 5-8% slower at 1
    thread than a fresh copy of it."""
    copy = folder / source.name
    shutil.copyfile(source, copy)
    return written_back(copy)


def write_llama_vocabulary(writer, tokens: list[str], types: list[int]) -> None:
    """A SentencePiece ("llama") vocabulary with <unk> 0, <s> 1 and </s> 2, every score 0."""
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
