"""The per-device ledger's values: the devices a model is split over, what each holds, and the decode bound."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.core.config.preset import DeviceProfile

CPU_ALIGNMENT = 32  # ggml-backend.cpp TENSOR_ALIGNMENT: the CPU buffer type (and so a CPU RPC node)

CPU = "CPU"


UNKNOWN = "unknown"  # verdict of a device whose budget nobody gave


@dataclass(frozen=True)
class SplitDevice:
    """A device llama.cpp may place layers on (an RPC node or a local GPU), as the ledger sees it."""

    name: str  # "RPC0", "CUDA0", "Vulkan0": llama.cpp's device name
    endpoint: str = ""  # "host:port" for an RPC node
    free_bytes: int | None = None  # what llama.cpp's default split uses (the node's report); None = unknown
    budget_bytes: int | None = None  # what the ledger checks against; None = unknown
    budget_source: str = ""
    bandwidth_bytes_per_s: float | None = None  # memory bandwidth of the device
    bandwidth_source: str = ""
    link_bytes_per_s: float | None = None  # RPC: the link to the node (probe)
    link_latency_s: float | None = None  # RPC: one round trip (probe)
    alignment: int = CPU_ALIGNMENT
    shares_host_memory: bool = False  # a local unified-memory GPU: its buffers come out of the host budget
    speed_profile: DeviceProfile | None = None  # whose speed figures it runs at (a local node: the host's)
    speed_source: str = ""  # "local node: the host's figures", "device profile NAME"


@dataclass(frozen=True)
class DeviceLedger:
    """What one device holds under a split, against its budget."""

    name: str
    endpoint: str
    layers: tuple[int, ...]  # repeating layers held (0-based); the output layer is `holds_output`
    holds_output: bool
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    overhead_bytes: int  # host only: the engine process beyond its buffers
    budget_bytes: int | None
    budget_source: str
    verdict: str  # FITS, TIGHT, DOES_NOT_FIT, or UNKNOWN without a budget
    reason: str

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.compute_bytes + self.overhead_bytes

    @property
    def headroom_bytes(self) -> int | None:
        return None if self.budget_bytes is None else self.budget_bytes - self.total_bytes


@dataclass(frozen=True)
class DecodeTerm:
    what: str  # "CPU memory", "RPC0 memory", "link to RPC0", "round trips"
    seconds: float
    source: str


class TermSum:
    """Time per token as the sum of its terms; no rate while a figure is missing."""

    terms: tuple[DecodeTerm, ...]
    missing: tuple[str, ...]

    @property
    def seconds_per_token(self) -> float:
        return sum(term.seconds for term in self.terms)

    @property
    def tokens_per_s(self) -> float | None:
        return 1.0 / self.seconds_per_token if self.terms and not self.missing and self.seconds_per_token > 0 else None


@dataclass(frozen=True)
class DecodeBound(TermSum):
    """Bandwidth-bound time per generated token, term by term; None when a figure is unknown."""

    terms: tuple[DecodeTerm, ...]
    missing: tuple[str, ...]  # figures without a source ("RPC0 bandwidth: no profile")

    @property
    def network_seconds(self) -> float:
        return sum(term.seconds for term in self.terms if term.what.startswith(("link", "round trips")))

    def dominant(self) -> str:
        """One line naming the largest share: 'network-bound: 62% of each token is the link'."""
        total = self.seconds_per_token
        if not self.terms or total <= 0:
            return "decode bound unavailable"
        network = self.network_seconds
        if network >= total / 2:
            return f"network-bound: {network / total:.0%} of each token is the link"
        top = max(self.terms, key=lambda term: term.seconds)
        return f"memory-bound: {top.seconds / total:.0%} of each token is {top.what}"


@dataclass(frozen=True)
class SplitRate(TermSum):
    """The speed model's predicted time per token of a split: each device's share, then the link terms."""

    terms: tuple[DecodeTerm, ...]
    missing: tuple[str, ...]  # a device without speed figures, a link not probed
    basis: str


@dataclass(frozen=True)
class SplitLedger:
    model: str
    preset: str
    ctx_size: int
    n_gpu_layers: int  # as llama.cpp gets it (-1 = all)
    splits: tuple[float, ...]  # the proportions used (tensor_split, or free memory)
    splits_source: str
    devices: tuple[DeviceLedger, ...]  # the host CPU first, then the devices in llama.cpp's order
    verdict: str
    reason: str  # names the device and the line that breaks
    max_ctx: int  # largest context (multiple of 256) every device with a budget fits; 0 = none
    best_tensor_split: tuple[int, ...]  # layers per device that balance headroom; () when not computable
    decode_empty: DecodeBound
    decode_full: DecodeBound
    rate_empty: SplitRate | None = None  # the speed model's prediction; None without the host's profile
    rate_full: SplitRate | None = None
