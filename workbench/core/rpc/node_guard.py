"""Checks on each command a client sends a node, made before llama.cpp's RPC server reads it.

llama.cpp's server (protocol v7, ggml/src/ggml-rpc/ggml-rpc.cpp of the llama.cpp that
llama-cpp-python 0.3.36 vendors) trusts its client in three places this module covers:
`deserialize_tensor` GGML_ASSERTs (aborting the process) that a tensor's data lies inside the
buffer it names, and `ggml_new_tensor_4d` asserts that a row is a whole number of blocks;
SET_TENSOR and GRAPH_COMPUTE are read into a vector of the size the header announces, before
anything checks it (a header announcing 4 GiB allocates and fills 4 GiB); ALLOC_BUFFER
allocates what it is asked. The guard mirrors the server's per-client buffer table from the
answers it forwards, and refuses a command that would hit one of these with one line.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from workbench.core.gguf.ggml_types import GGML_TYPES

# enum rpc_cmd (ggml-rpc.cpp)
ALLOC_BUFFER, GET_ALIGNMENT, GET_MAX_SIZE, BUFFER_GET_BASE, FREE_BUFFER, BUFFER_CLEAR = range(6)
SET_TENSOR, SET_TENSOR_HASH, GET_TENSOR, COPY_TENSOR, GRAPH_COMPUTE, GET_DEVICE_MEMORY = range(6, 12)
INIT_TENSOR, GET_ALLOC_SIZE, HELLO, DEVICE_COUNT, GRAPH_RECOMPUTE, MEMSET_TENSOR = range(12, 18)
COMMAND_NAMES = ("ALLOC_BUFFER", "GET_ALIGNMENT", "GET_MAX_SIZE", "BUFFER_GET_BASE", "FREE_BUFFER", "BUFFER_CLEAR",
                 "SET_TENSOR", "SET_TENSOR_HASH", "GET_TENSOR", "COPY_TENSOR", "GRAPH_COMPUTE", "GET_DEVICE_MEMORY",
                 "INIT_TENSOR", "GET_ALLOC_SIZE", "HELLO", "DEVICE_COUNT", "GRAPH_RECOMPUTE", "MEMSET_TENSOR")

TENSOR_SIZE = 296  # sizeof(rpc_tensor), packed
_MAX_SRC = 10  # GGML_MAX_SRC
SET_TENSOR_HEAD = TENSOR_SIZE + 1 + 8  # | rpc_tensor | cache_flag u8 | offset u64 | data |
# The request sizes of the fixed-layout commands (the rpc_msg_*_req structs) and the fixed answer
# sizes (rpc_msg_*_rsp); None: the command has no answer; GET_TENSOR answers the size it asks.
REQUEST_SIZES = {ALLOC_BUFFER: 12, GET_ALIGNMENT: 4, GET_MAX_SIZE: 4, BUFFER_GET_BASE: 8, FREE_BUFFER: 8,
                 BUFFER_CLEAR: 9, SET_TENSOR_HASH: TENSOR_SIZE + 16, GET_TENSOR: TENSOR_SIZE + 16,
                 COPY_TENSOR: 2 * TENSOR_SIZE, GET_DEVICE_MEMORY: 4, INIT_TENSOR: TENSOR_SIZE,
                 GET_ALLOC_SIZE: 4 + TENSOR_SIZE * (1 + _MAX_SRC), DEVICE_COUNT: 0, GRAPH_RECOMPUTE: 4,
                 MEMSET_TENSOR: TENSOR_SIZE + 17}
ANSWER_SIZES = {ALLOC_BUFFER: 16, GET_ALIGNMENT: 8, GET_MAX_SIZE: 8, BUFFER_GET_BASE: 8, SET_TENSOR_HASH: 1,
                COPY_TENSOR: 1, GET_DEVICE_MEMORY: 16, GET_ALLOC_SIZE: 8, DEVICE_COUNT: 4}
# A graph is | device u32 | n_nodes u32 | node ids u64 × n | n_tensors u32 | rpc_tensor × m |: a few
# MiB for the largest models llama.cpp builds graphs for; far more is no graph but an allocation.
MAX_GRAPH_BYTES = 256 << 20

# rpc_tensor fields read here: type u32 @8, buffer u64 @12, ne u32[4] @20, nb u32[4] @36, data u64 @220
_TENSOR_FIELDS = struct.Struct("<8xIQ4I4I168xQ68x")
assert _TENSOR_FIELDS.size == TENSOR_SIZE
_U64 = (1 << 64) - 1
_TENSOR_DTYPE = {"names": ["type", "buffer", "ne", "nb", "data"],
                 "formats": ["<u4", "<u8", ("<u4", 4), ("<u4", 4), "<u8"],
                 "offsets": [8, 12, 20, 36, 220], "itemsize": TENSOR_SIZE}
# per type id: elements per block and bytes per block, 0 for an id that is no type
_BLOCK_SIZES = [GGML_TYPES[i].block_size if i in GGML_TYPES else 0 for i in range(max(GGML_TYPES) + 1)]
_TYPE_SIZES = [GGML_TYPES[i].type_size if i in GGML_TYPES else 0 for i in range(max(GGML_TYPES) + 1)]


class Refused(Exception):
    """A command the node does not hand to llama.cpp; `reason` is one line for the node's log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Buffer:
    """One buffer llama.cpp allocated for this client: its handle's base address and size."""

    base: int
    size: int


def command_name(cmd: int) -> str:
    return COMMAND_NAMES[cmd] if 0 <= cmd < len(COMMAND_NAMES) else f"command {cmd}"


def tensor_nbytes(type_id: int, ne: tuple[int, ...], nb: tuple[int, ...]) -> int:
    """ggml_nbytes of a tensor as the server builds it, in its 64-bit arithmetic (it wraps)."""
    kind = GGML_TYPES[type_id]
    if any(n <= 0 for n in ne):
        return 0
    if kind.block_size == 1:
        total = kind.type_size + sum((ne[i] - 1) * nb[i] for i in range(4))
    else:
        total = ne[0] * nb[0] // kind.block_size + sum((ne[i] - 1) * nb[i] for i in range(1, 4))
    return total & _U64


def check_tensor(raw: bytes | memoryview, offset: int, buffers: dict[int, Buffer], what: str) -> tuple[int, int]:
    """The (buffer handle, data address) of the rpc_tensor at `offset`; Refused where llama.cpp would abort."""
    type_id, handle, ne0, ne1, ne2, ne3, nb0, nb1, nb2, nb3, data = _TENSOR_FIELDS.unpack_from(raw, offset)
    kind = GGML_TYPES.get(type_id)
    if kind is None:
        raise Refused(f"{what}: tensor type {type_id} is no ggml type this node knows")
    if ne0 % kind.block_size:
        raise Refused(f"{what}: a row of {ne0} {kind.name} elements is not a whole number of blocks of {kind.block_size}")
    buffer = buffers.get(handle)
    if buffer is not None:  # the server ignores a handle it did not allocate for this client
        nbytes = tensor_nbytes(type_id, (ne0, ne1, ne2, ne3), (nb0, nb1, nb2, nb3))
        end = data + nbytes
        if end > _U64 or data < buffer.base or end > buffer.base + buffer.size:
            raise Refused(f"{what}: tensor data [{data:#x}, +{nbytes}) lies outside its buffer "
                          f"[{buffer.base:#x}, +{buffer.size})")
    return handle, data


def check_request(cmd: int, size: int, head: bytes | memoryview, buffers: dict[int, Buffer]) -> None:
    """Refused unless llama.cpp's server may safely read command `cmd` of `size` bytes starting with `head`.

    `head` holds the first head_bytes(cmd, size) bytes of the request: all of it but a SET_TENSOR's data.
    """
    check_size(cmd, size)
    name = command_name(cmd)
    if cmd == SET_TENSOR:
        _check_set_tensor(size, head, buffers)
    elif cmd == GRAPH_COMPUTE:
        _check_graph(size, head, buffers)
    elif cmd in (SET_TENSOR_HASH, GET_TENSOR, INIT_TENSOR, MEMSET_TENSOR):
        check_tensor(head, 0, buffers, name)
    elif cmd == COPY_TENSOR:
        check_tensor(head, 0, buffers, f"{name} source")
        check_tensor(head, TENSOR_SIZE, buffers, f"{name} destination")
    elif cmd == GET_ALLOC_SIZE:
        check_tensor(head, 4, buffers, name)
        for index in range(_MAX_SRC):
            start = 4 + TENSOR_SIZE * (1 + index)
            if struct.unpack_from("<Q", head, start)[0] != 0:  # the server reads the sources whose id is set
                check_tensor(head, start, buffers, f"{name} source {index}")


def check_size(cmd: int, size: int) -> None:
    """Refused unless a request of `size` bytes is one command `cmd` can be: checked before any of it is read."""
    name = command_name(cmd)
    if cmd == HELLO:
        raise Refused("a second HELLO on one connection")
    if cmd == SET_TENSOR:
        if size < SET_TENSOR_HEAD:
            raise Refused(f"SET_TENSOR of {size} bytes is shorter than its header ({SET_TENSOR_HEAD})")
    elif cmd == GRAPH_COMPUTE:
        if size > MAX_GRAPH_BYTES:
            raise Refused(f"GRAPH_COMPUTE of {size} bytes (more than {MAX_GRAPH_BYTES >> 20} MiB is no graph)")
        if size < 12:
            raise Refused(f"GRAPH_COMPUTE of {size} bytes is shorter than its header")
    elif cmd not in REQUEST_SIZES:
        raise Refused(f"unknown {name}")
    elif size != REQUEST_SIZES[cmd]:
        raise Refused(f"{name} of {size} bytes (the protocol's is {REQUEST_SIZES[cmd]})")


def head_bytes(cmd: int, size: int) -> int:
    """How much of a request the guard reads before forwarding it (a SET_TENSOR's data streams through)."""
    return min(size, SET_TENSOR_HEAD) if cmd == SET_TENSOR else size


def _check_set_tensor(size: int, head: bytes | memoryview, buffers: dict[int, Buffer]) -> None:
    handle, data = check_tensor(head, 0, buffers, "SET_TENSOR")
    buffer = buffers.get(handle)
    length = size - SET_TENSOR_HEAD
    if buffer is None:
        raise Refused(f"SET_TENSOR of {length} bytes into buffer {handle:#x}, which this client did not allocate")
    (offset,) = struct.unpack_from("<Q", head, TENSOR_SIZE + 1)
    start = data + offset
    if not buffer.base <= start < buffer.base + buffer.size or length > buffer.base + buffer.size - start:
        raise Refused(f"SET_TENSOR of {length} bytes at {start:#x} lies outside its buffer "
                      f"[{buffer.base:#x}, +{buffer.size})")


def _check_graph(size: int, head: bytes | memoryview, buffers: dict[int, Buffer]) -> None:
    (n_nodes,) = struct.unpack_from("<I", head, 4)
    tensors_at = 8 + 8 * n_nodes + 4
    if n_nodes == 0 or tensors_at > size:
        raise Refused(f"GRAPH_COMPUTE of {n_nodes} nodes in {size} bytes")
    (n_tensors,) = struct.unpack_from("<I", head, tensors_at - 4)
    if tensors_at + n_tensors * TENSOR_SIZE != size:
        raise Refused(f"GRAPH_COMPUTE of {n_nodes} nodes and {n_tensors} tensors is not {size} bytes")
    first_bad = first_bad_tensor(head, tensors_at, n_tensors, buffers)
    if first_bad is not None:
        check_tensor(head, tensors_at + first_bad * TENSOR_SIZE, buffers, f"GRAPH_COMPUTE tensor {first_bad}")


def first_bad_tensor(raw: bytes | memoryview, start: int, count: int, buffers: dict[int, Buffer]) -> int | None:
    """Index of the first of `count` rpc_tensors from `start` that check_tensor refuses; None if none.

    A graph holds hundreds of tensors per token: the same checks, on all of them at once in numpy's
    uint64 arithmetic (which wraps as the server's size_t does), keep the relay's cost per token small.
    """
    import numpy as np  # deferred: importing numpy costs start-up time, and only graphs need it

    rows = np.frombuffer(raw, dtype=_TENSOR_DTYPE, count=count, offset=start)
    types = rows["type"].astype(np.int64)
    known = types < len(_BLOCK_SIZES)
    in_table = np.minimum(types, len(_BLOCK_SIZES) - 1)
    block = np.where(known, np.asarray(_BLOCK_SIZES, dtype=np.uint64)[in_table], 0).astype(np.uint64)
    width = np.where(known, np.asarray(_TYPE_SIZES, dtype=np.uint64)[in_table], 0).astype(np.uint64)
    bad = block == 0
    ne = rows["ne"].astype(np.uint64)
    nb = rows["nb"].astype(np.uint64)
    safe_block = np.maximum(block, np.uint64(1))
    bad |= ne[:, 0] % safe_block != 0
    if buffers:
        handles = np.array(sorted(buffers), dtype=np.uint64)
        bases = np.array([buffers[h].base for h in sorted(buffers)], dtype=np.uint64)
        sizes = np.array([buffers[h].size for h in sorted(buffers)], dtype=np.uint64)
        at = np.minimum(np.searchsorted(handles, rows["buffer"]), len(handles) - 1)
        held = handles[at] == rows["buffer"]
        one = np.uint64(1)
        with np.errstate(over="ignore"):
            rest = ((ne[:, 1:] - one) * nb[:, 1:]).sum(axis=1, dtype=np.uint64)
            first = np.where(block == one, width + (ne[:, 0] - one) * nb[:, 0], ne[:, 0] * nb[:, 0] // safe_block)
            nbytes = np.where((ne == 0).any(axis=1), np.uint64(0), first + rest)
            data = rows["data"]
            end = data + nbytes
        base, size = bases[at], sizes[at]
        bad |= held & ((end < data) | (data < base) | (end > base + size))
    where = np.flatnonzero(bad)
    return int(where[0]) if where.size else None
