"""Quantization presets and device profiles: the frozen values the rest of the core uses."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    """How to run a model, in llama.cpp's vocabulary (maps 1:1 to llama-server flags)."""

    name: str
    description: str = ""
    weights: str = "keep"  # "keep" or a llama.cpp weight type: "Q4_K_M", "Q8_0", "F16", ...
    ctx_size: int = 2048
    batch_size: int = 512
    ubatch_size: int = 512
    threads: int = 0  # 0 = auto: the fast cores on big.LITTLE boards, else physical cores minus one (>= 1)
    cpu_cores: tuple[int, ...] = ()  # CPUs to pin to (llama-server -C/--cpu-range); () = chosen by threads
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    flash_attn: bool = False
    mlock: bool = False
    mmap: bool = True
    draft_prompt_lookup: int = 0  # speculative decoding by prompt lookup: draft tokens, 0 = off
    swa_full: bool = False  # sliding-window layers keep the whole context (llama-server --swa-full)
    parallel: int = 1  # sequences decoded together (llama-server -np): sizes the KV streams and the recurrent state
    chat_template: str = ""  # "" = the model's own (or its family's); a llama.cpp built-in name; "completion"
    # True: text in messages that spells a special token (<|im_start|>) becomes that control token, as
    # llama-cpp-python and llama-server do; False: it stays text, so a message cannot open a turn
    special_tokens_in_messages: bool = False
    source: str = ""  # file it was loaded from ("" when built in code)
    # Where layers go (workbench/core/config/preset_split.py): llama-server -ngl, -sm, -ts, -mg, --rpc.
    gpu_layers: int | None = None  # None = not set; -1 = "all" (every layer and the output layer)
    split_mode: str = "layer"  # "layer", "row" or "none"
    tensor_split: tuple[float, ...] = ()  # proportions per device (RPC nodes first); () = by free memory
    main_gpu: int = 0
    rpc: tuple[str, ...] = ()  # "host:port" of each RPC node, in device order
    n_cpu_moe: int = 0  # routed experts of the first N layers stay in CPU memory (llama-server --n-cpu-moe)


@dataclass(frozen=True)
class ThreadRates:
    """What one thread count achieves on a device, as `workbench devices probe` measured it with llama.cpp."""

    threads: int
    token_us: float  # decode: fixed cost of one token (graph build, sync, logits out), microseconds
    layer_us: float  # decode: fixed cost per layer per token
    read_gbs: tuple[tuple[str, float], ...]  # decode: weight bytes read per second, by ggml type
    kv_read_gbs: float | None  # decode: KV cache bytes the attention reads per second
    prefill_token_us: float  # prefill: fixed cost per prompt token
    prefill_layer_us: float  # prefill: fixed cost per layer per prompt token
    prefill_gflops: tuple[tuple[str, float], ...]  # prefill: matrix FLOPs per second, by ggml type
    attn_gflops: float | None = None  # decode: attention FLOPs per second while the KV cache fits the cache
    # prefill: attention's cost per (head, query, cell) at head dims 64 + 64, by the size of one layer's
    # scores: (score MB, ns), measured at two sizes (a score matrix the cache holds and one it does not)
    prefill_attn_points: tuple[tuple[float, float], ...] = ()
    cached_read_gbs: tuple[tuple[str, float], ...] = ()  # decode: read rate of weights that fit the cache
    cache_mb: float = 0.0  # the last-level cache: a model reading less than this per token runs from it
    row_ns: float = 0.0  # decode: cost per weight row a token's mat-vecs compute, beyond the row's bytes
    # prefill: cost per element a prompt token's elementwise ops write (norms, RoPE, activations, adds); where
    # measured it replaces prefill_layer_us, so that a wider or busier layer costs more than the probe's
    prefill_element_ns: float = 0.0
    # decode: cost per op of a token's graph (each ends in a barrier of the threads); where measured it
    # replaces layer_us, so that a layer of more ops costs more than the probe's
    node_us: float = 0.0
    # decode: the lowest and highest node_us, Q8_0 read rate and cached Q8_0 read rate among the probe's
    # passes (what the machine moved them by while it measured); () = one pass. They widen the band.
    node_us_range: tuple[float, float] = ()
    read_gbs_range: tuple[float, float] = ()
    cached_read_gbs_range: tuple[float, float] = ()
    # decode: the Q8_0 read rate from memory llama.cpp allocated itself (mmap off; an RPC node's buffers), where
    # it can differ from a mapped file's; None = not measured (the mapped rates stand in)
    unmapped_read_gbs: float | None = None


@dataclass(frozen=True)
class DeviceProfile:
    """A device's memory budget and limits."""

    name: str
    ram_total_mb: int
    reserves_mb: tuple[tuple[str, int], ...] = ()  # ("os", 1200), ("dma_frame_buffers", 800)
    mem_bandwidth_gbs: float = 0.0
    power_limit_w: float | None = None
    cores: int = 1
    fast_cores: int | None = None  # big cores of a big.LITTLE board (threads = 0 runs one each); None = homogeneous
    battery_wh: float | None = None  # battery capacity, for hours of generation and answers per charge
    description: str = ""
    notes: tuple[tuple[str, str], ...] = ()  # figure -> where it comes from
    source: str = ""
    accelerator: str = "none"  # "cuda", "vulkan" or "none"
    vram_mb: int | None = None  # the accelerator's own memory; None = unified (it uses the RAM above)
    vram_bandwidth_gbs: float = 0.0  # bandwidth of that own memory (unified: mem_bandwidth_gbs)
    accelerator_slower_than_cpu: bool = False  # published runs on this board: offloading to it is slower
    effective_bandwidth_gbs: float | None = None  # read rate decode reaches (published runs), not the peak
    effective_gflops: float | None = None  # matrix FLOPs per second prefill reaches (published runs)
    effective_backend: str = "cpu"  # the backend those published runs used: "cpu", "cuda" or "vulkan"
    thread_rates: tuple[ThreadRates, ...] = ()  # measured by `workbench devices probe`, by thread count
    cpu_features: tuple[str, ...] | None = None  # config.cpu_features names; None = not stated (the host's are used)

    @property
    def unified_memory(self) -> bool:
        """Whether the accelerator's buffers come out of the same RAM budget as everything else."""
        return self.vram_mb is None

    @property
    def reserved_mb(self) -> int:
        return sum(mb for _, mb in self.reserves_mb)

    @property
    def budget_mb(self) -> int:
        """What is left for the LLM: total minus every reserve."""
        return self.ram_total_mb - self.reserved_mb
