"""Where the weight options come from: a local file (as it is, or re-quantized) or a hub repository's files."""

from __future__ import annotations

from workbench.core.config.preset import DeviceProfile
from workbench.core.fit.quality import PUBLISHED_PPL
from workbench.core.fit.search import fit
from workbench.core.fit.types import FitRequest, FitResult, WeightOption
from workbench.core.gguf.ggml_types import QUANT_TYPES
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.hub.client import HubConnection
from workbench.core.hub.files import RepoFiles, list_gguf_files
from workbench.core.hub.preview import read_remote_header
from workbench.core.ledger.speed import SpeedCorrection
from workbench.core.ledger.weights import requantized_weights_bytes
from workbench.core.units import MIB

FULL_PRECISION = ("F32", "F16", "BF16")
MAX_HEADERS = 32  # header reads per repository (each is range requests of up to the header's size)
# The re-quantizations offered for a local file: one type per bits class of the published table (the
# _M K-quant mix where there is one), plus Q4_0, a 4-bit type llama.cpp's CPU backend repacks (cpu_repack.py).
REQUANT_TYPES = ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0", "Q3_K_M", "Q2_K")


def local_options(model: ModelInfo) -> tuple[WeightOption, ...]:
    """The file as it is, and each smaller type of REQUANT_TYPES that llama-quantize makes from it."""
    current = (model.file_type or "").upper()
    options = [WeightOption(model, "keep", current or "unknown", "the file as is")]
    note = "" if current in FULL_PRECISION else " (from an already quantized file: at least the table's loss)"
    for kind in REQUANT_TYPES:
        if kind == current or kind not in QUANT_TYPES or kind not in PUBLISHED_PPL:
            continue
        if requantized_weights_bytes(model, kind) < model.weights_bytes:
            options.append(WeightOption(model, kind, kind, f"re-quantized from {current or 'the file'} "
                                                           f"(workbench quantize){note}"))
    return tuple(options)


def repo_options(files: RepoFiles, budget_bytes: int, *, connection: HubConnection | None = None
                 ) -> tuple[WeightOption, ...]:
    """Each GGUF file of the repository that could fit `budget_bytes` (all devices together), from its header:
    at most MAX_HEADERS of them, the largest (the least lossy), so a repository of many files costs a bounded
    number of header reads."""
    options = []
    small_enough = [f for f in files.files if f.size_bytes is None or f.size_bytes <= budget_bytes]
    small_enough.sort(key=lambda f: f.size_bytes or 0, reverse=True)
    for gguf_file in small_enough[:MAX_HEADERS]:
        header = read_remote_header(files.repo, gguf_file.name, revision=files.commit or files.revision,
                                    listing=gguf_file, connection=connection)
        kind = (header.header_quant or header.name_quant or "unknown").upper()
        options.append(WeightOption(header.model, "keep", kind, f"hub file {gguf_file.name}", filename=gguf_file.name))
    return tuple(options)


def best_file_for(files: RepoFiles, device: DeviceProfile, request: FitRequest, *,
                  connection: HubConnection | None = None, correction: SpeedCorrection | None = None) -> FitResult:
    """The fit search over a repository's own files: `result.chosen.option.filename` is the file to download
    (None chosen when nothing fits; `result.reason` says why and what would)."""
    budget = device.budget_mb * MIB + sum(d.budget_bytes or 0 for d in request.devices if not d.shares_host_memory)
    return fit(repo_options(files, budget, connection=connection), device, request, correction)


def fit_repo(repo: str, device: DeviceProfile, request: FitRequest, *, revision: str = "main",
             connection: HubConnection | None = None, correction: SpeedCorrection | None = None) -> FitResult:
    return best_file_for(list_gguf_files(repo, revision=revision, connection=connection), device, request,
                         connection=connection, correction=correction)
