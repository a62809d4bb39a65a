"""A repository's GGUF files: sizes and LFS hashes from the hub, quant type from the name, split parts grouped."""

from __future__ import annotations

import re
from dataclasses import dataclass

from workbench.core.errors import HubError
from workbench.core.hub.client import HubConnection, hub_connection, hub_errors

# llama.cpp's quantization names as they appear in file names (longest alternatives first).
_QUANT_PATTERN = re.compile(
    r"(?<![A-Za-z0-9])("
    r"IQ[1-4]_(?:XXS|XS|NL|S|M)"
    r"|Q[2-8]_K(?:_XL|_[SML])?"
    r"|Q[4-8]_[01]"
    r"|TQ[12]_0"
    r"|MXFP4(?:_MOE)?"
    r"|BF16|FP16|F16|FP32|F32"
    r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_SPLIT_PATTERN = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


@dataclass(frozen=True)
class RemoteFile:
    """One file of a repository as the hub describes it."""

    path: str
    size_bytes: int | None
    sha256: str | None  # the LFS hash; None for a file not stored in LFS


@dataclass(frozen=True)
class GGUFFile:
    """A GGUF model in a repository: one file, or the parts of a split file in order."""

    name: str  # the path to ask for: the file, or the first part of a split file
    quant: str | None  # parsed from the name ("Q4_K_M"); the header confirms it in a preview
    parts: tuple[RemoteFile, ...]

    @property
    def size_bytes(self) -> int | None:
        sizes = [part.size_bytes for part in self.parts]
        return None if any(size is None for size in sizes) else sum(sizes)  # type: ignore[misc]

    @property
    def is_split(self) -> bool:
        return len(self.parts) > 1


@dataclass(frozen=True)
class RepoFiles:
    repo: str
    revision: str
    commit: str  # the commit the listing describes; downloads pin to it
    gated: bool
    files: tuple[GGUFFile, ...]  # smallest first
    other_files: tuple[str, ...] = ()  # README, config, ... (not GGUF)

    def find(self, name: str) -> GGUFFile:
        for gguf_file in self.files:
            if name == gguf_file.name or name in (part.path for part in gguf_file.parts):
                return gguf_file
        raise HubError(f"no GGUF file {name} in {self.repo}", fix=f"Pick one of: {', '.join(f.name for f in self.files) or 'none'}")

    def by_quant(self, quant: str) -> GGUFFile:
        wanted = normalise_quant(quant)
        matches = [f for f in self.files if f.quant == wanted]
        if not matches:
            have = sorted({f.quant for f in self.files if f.quant})
            raise HubError(f"no {wanted} file in {self.repo}", fix=f"Quant types it has: {', '.join(have) or 'none recognised'}")
        if len(matches) > 1:
            names = ", ".join(f.name for f in matches)
            raise HubError(f"{len(matches)} files in {self.repo} are {wanted}: {names}", fix="Name the file instead of --quant")
        return matches[0]


def normalise_quant(text: str) -> str:
    upper = text.strip().upper()
    return {"FP16": "F16", "FP32": "F32"}.get(upper, upper)


def quant_from_name(filename: str) -> str | None:
    """The quantization type a file name states ("Llama-3.2-1B-Instruct-Q4_K_M.gguf" -> "Q4_K_M")."""
    base = filename.rsplit("/", 1)[-1]
    found = _QUANT_PATTERN.findall(base)
    return normalise_quant(found[-1]) if found else None  # the last one: names lead with the model, end with the quant


def split_part(filename: str) -> tuple[str, int, int] | None:
    """(stem, index, count) for `stem-00001-of-00003.gguf`, None for an unsplit file."""
    match = _SPLIT_PATTERN.match(filename)
    if not match:
        return None
    return match["stem"], int(match["index"]), int(match["count"])


def group_gguf_files(files: tuple[RemoteFile, ...]) -> tuple[GGUFFile, ...]:
    """GGUF files with split parts gathered under their first part, smallest model first."""
    singles: list[GGUFFile] = []
    groups: dict[tuple[str, int], list[tuple[int, RemoteFile]]] = {}
    for remote in files:
        if not remote.path.lower().endswith(".gguf"):
            continue
        split = split_part(remote.path)
        if split is None:
            singles.append(GGUFFile(name=remote.path, quant=quant_from_name(remote.path), parts=(remote,)))
        else:
            stem, index, count = split
            groups.setdefault((stem, count), []).append((index, remote))
    for (stem, count), numbered in groups.items():
        numbered.sort(key=lambda pair: pair[0])
        parts = tuple(remote for _, remote in numbered)
        # A split set with a part missing is still listed (so it can be seen), under its first present part.
        singles.append(GGUFFile(name=parts[0].path, quant=quant_from_name(stem + ".gguf"), parts=parts))
    return tuple(sorted(singles, key=lambda f: (f.size_bytes is None, f.size_bytes or 0, f.name)))


def missing_parts(gguf_file: GGUFFile) -> tuple[int, ...]:
    """Part numbers a split file lacks on the hub (empty when complete or unsplit)."""
    split = split_part(gguf_file.parts[0].path)
    if split is None:
        return ()
    have = {split_part(part.path)[1] for part in gguf_file.parts}  # type: ignore[index]
    return tuple(i for i in range(1, split[2] + 1) if i not in have)


def list_gguf_files(repo: str, *, revision: str = "main", connection: HubConnection | None = None) -> RepoFiles:
    """The repository's GGUF files with sizes and LFS sha256, from one model-info request."""
    conn = connection or hub_connection()
    conn.check_online()
    repo = repo.strip().strip("/")
    if repo.count("/") != 1:
        raise HubError(f"{repo!r} is not a repository id", fix="Give it as owner/name, e.g. Qwen/Qwen2.5-0.5B-Instruct-GGUF")
    with hub_errors(conn, repo=repo):
        info = conn.api().model_info(repo, revision=revision, files_metadata=True, timeout=conn.timeout())
    remote_files = tuple(
        RemoteFile(path=s.rfilename, size_bytes=(s.lfs.size if s.lfs else s.size), sha256=(s.lfs.sha256 if s.lfs else None))
        for s in (info.siblings or ())
    )
    return RepoFiles(
        repo=info.id or repo,
        revision=revision,
        commit=info.sha or "",
        gated=bool(info.gated),
        files=group_gguf_files(remote_files),
        other_files=tuple(f.path for f in remote_files if not f.path.lower().endswith(".gguf")),
    )
