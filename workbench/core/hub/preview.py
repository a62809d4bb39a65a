"""Fit preview before download: read a remote GGUF header over HTTP ranges, then predict its ledger."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.errors import HubError
from workbench.core.gguf.checks import check_merged_split
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.gguf.reader import read_gguf
from workbench.core.hub.client import HubConnection, HubUnreachable, hub_connection, hub_errors
from workbench.core.hub.files import GGUFFile, RemoteFile, list_gguf_files, missing_parts, quant_from_name, split_part
from workbench.core.hub.header_cache import HeaderCacheMiss, load_header, save_header
from workbench.core.hub.metadata import file_metadata
from workbench.core.hub.names import user_repo_id
from workbench.core.hub.range_stream import RangeStream
from workbench.core.ledger.predict import predict_ledger
from workbench.core.ledger.types import DOES_NOT_FIT, Ledger

CTX_STEP = 256  # llama.cpp pads the context to 256 cells


@dataclass(frozen=True)
class RemoteHeader:
    """A remote model's header and what reading it cost."""

    repo: str
    filename: str
    model: ModelInfo  # all parts of a split file merged: every tensor, the total size
    name_quant: str | None  # from the file name
    bytes_fetched: int  # over the network by this call (0 when every part came from the header cache)
    requests: int
    from_cache: bool

    @property
    def header_quant(self) -> str | None:
        return self.model.file_type

    @property
    def quant_confirmed(self) -> bool:
        return bool(self.name_quant and self.header_quant and self.name_quant.upper() == self.header_quant.upper())


@dataclass(frozen=True)
class FitPreview:
    """Whether a remote model fits a device with a preset, before a byte of weights is downloaded."""

    header: RemoteHeader
    ledger: Ledger
    largest_ctx: int  # largest context (multiple of 256, at most the trained length) that fits; 0 if none
    preset: str
    device: str

    @property
    def fits(self) -> bool:
        return self.ledger.verdict != DOES_NOT_FIT


def read_remote_header(
    repo: str,
    filename: str,
    *,
    revision: str = "main",
    listing: GGUFFile | None = None,
    connection: HubConnection | None = None,
) -> RemoteHeader:
    """The ModelInfo of a GGUF file on the hub, from its header bytes only.

    Uses the header cache when it holds this file (same LFS sha256); when the hub is
    unreachable it falls back to whatever the cache holds for the name.
    """
    conn = connection or hub_connection()
    repo = user_repo_id(repo)  # it names header-cache folders and the URL
    if listing is None:
        try:
            listing = list_gguf_files(repo, revision=revision, connection=conn).find(filename)
        except HubUnreachable:
            offline = _from_cache_only(repo, filename)
            if offline is None:
                raise
            return offline
        except HubError as error:
            if not conn.offline:
                raise
            offline = _from_cache_only(repo, filename)
            if offline is None:
                raise error from None
            return offline
    gaps = missing_parts(listing)
    if gaps:
        raise HubError(f"{listing.name} is split but the hub lacks part(s) {', '.join(map(str, gaps))}", where=repo, fix="Pick another file")
    infos, fetched, requests, all_cached = [], 0, 0, True
    for part in listing.parts:
        info, part_fetched, part_requests, cached = _read_part(repo, part, revision, conn)
        infos.append(info)
        fetched += part_fetched
        requests += part_requests
        all_cached = all_cached and cached
    return RemoteHeader(repo, listing.name, _merge_parts(infos), listing.quant, fetched, requests, all_cached)


def preview_fit(
    repo: str,
    filename: str,
    preset: Preset,
    device: DeviceProfile,
    *,
    revision: str = "main",
    listing: GGUFFile | None = None,
    connection: HubConnection | None = None,
) -> FitPreview:
    """Read the remote header and predict the ledger at the preset's context, plus the largest context that fits."""
    header = read_remote_header(repo, filename, revision=revision, listing=listing, connection=connection)
    ledger = predict_ledger(header.model, preset, device)
    return FitPreview(header, ledger, largest_fitting_ctx(header.model, preset, device), preset.name, device.name)


def largest_fitting_ctx(model: ModelInfo, preset: Preset, device: DeviceProfile) -> int:
    """Largest context, in steps of 256 up to the trained length, whose predicted ledger is not over budget."""
    def fits(steps: int) -> bool:
        return predict_ledger(model, preset, device, ctx_size=steps * CTX_STEP).verdict != DOES_NOT_FIT

    low, high = 0, max(model.n_ctx_train, CTX_STEP) // CTX_STEP
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low * CTX_STEP


def _read_part(repo: str, part: RemoteFile, revision: str, conn: HubConnection) -> tuple[ModelInfo, int, int, bool]:
    """(ModelInfo, bytes fetched, requests, from cache) for one file."""
    label = f"{repo}/{part.path}"
    stored = load_header(repo, part.path, sha256=part.sha256)
    if stored is not None:
        try:
            return read_gguf(stored.stream(), label=label), 0, 0, True
        except HeaderCacheMiss:
            pass  # stored by an older reader that read less: fetch again
    conn.check_online()
    meta = file_metadata(conn, repo, part.path, revision, need_etag=False)
    size = meta.size if meta.size is not None else (part.size_bytes or 0)
    with hub_errors(conn, repo=repo, filename=part.path):
        stream = RangeStream(meta.location, size, client=conn.session(), headers=conn.headers(meta.location), timeout=conn.timeout(), name=label)
        info = read_gguf(stream, label=label)
    try:
        save_header(repo, part.path, size, part.sha256, stream.segments)
    except OSError:
        pass  # a full or read-only disk costs the offline copy only: the preview itself is complete
    return info, stream.bytes_fetched, stream.requests + 1, False


def _from_cache_only(repo: str, filename: str) -> RemoteHeader | None:
    """A header read purely from the cache (hub unreachable); split parts must all be stored."""

    split = split_part(filename)
    names = [filename]
    if split is not None:
        stem, _, count = split
        names = [f"{stem}-{index:05d}-of-{count:05d}.gguf" for index in range(1, count + 1)]
    infos = []
    for name in names:
        stored = load_header(repo, name)
        if stored is None:
            return None
        try:
            infos.append(read_gguf(stored.stream(), label=f"{repo}/{name}"))
        except HeaderCacheMiss:
            return None
    return RemoteHeader(repo, filename, _merge_parts(infos), quant_from_name(filename), 0, 0, True)


def _merge_parts(infos: list[ModelInfo]) -> ModelInfo:
    """A split model as one: the first part's metadata with every part's tensors and the summed size."""
    if len(infos) == 1:
        return infos[0]

    first = infos[0]
    merged = dataclasses.replace(
        first,
        file_size=sum(info.file_size for info in infos),
        tensors=tuple(tensor for info in infos for tensor in info.tensors),
        header_bytes=sum(info.header_bytes for info in infos),
    )
    check_merged_split(merged)  # block_count against the layers all the parts hold
    return merged
