"""A repository's GGUF files: sizes and LFS hashes from the hub, quant type from the name, split parts grouped."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from workbench.core.errors import HubError
from workbench.core.hub.client import HubConnection, get_json_bounded, hub_connection, hub_errors
from workbench.core.hub.names import (
    TRUSTED_FIX,
    HubAnswerRefused,
    commit_problem,
    file_name_problem,
    refused,
    repo_id_problem,
    require,
    sha256_problem,
    size_problem,
    user_repo_id,
    user_revision,
)

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
    """The repository's GGUF files with sizes and LFS sha256, from one model-info request.

    Every name the answer holds (repository id, commit, file paths, sizes, hashes) is
    checked against the hub's own forms here, where it enters: they become cache paths.
    """
    from huggingface_hub.hf_api import ModelInfo as HubModelInfo  # deferred: importing huggingface_hub costs start-up time

    conn = connection or hub_connection()
    conn.check_online()
    repo = user_repo_id(repo)
    revision = user_revision(revision)
    server = conn.endpoint
    with hub_errors(conn, repo=repo):
        # The request HfApi.model_info(repo, revision=, files_metadata=True) sends, read with a size bound.
        data = get_json_bounded(conn, f"{server}/api/models/{repo}/revision/{quote(revision, safe='')}",
                                params={"blobs": True}, what=f"the file listing of {repo}")
        try:
            info = HubModelInfo(**data)
            siblings = tuple(info.siblings or ())
            listed = [(s.rfilename, s.lfs.size if s.lfs else s.size, s.lfs.sha256 if s.lfs else None) for s in siblings]
        except (TypeError, KeyError, ValueError, AttributeError) as error:  # JSON that is no model listing
            raise HubAnswerRefused(
                f"the hub at {server} answered the file listing of {repo} with something that is not a model listing ({type(error).__name__})",
                fix=TRUSTED_FIX,
            ) from None
    listed_repo = require(info.id or repo, repo_id_problem, kind="the repository id", server=server)
    commit = info.sha or ""
    if commit:
        require(commit, commit_problem, kind="the commit", server=server)
    remote_files = tuple(_checked_remote_file(path, size, sha256, server) for path, size, sha256 in listed)
    return RepoFiles(
        repo=listed_repo,  # type: ignore[arg-type]
        revision=revision,
        commit=commit,
        gated=bool(info.gated),
        files=group_gguf_files(remote_files),
        other_files=tuple(f.path for f in remote_files if not f.path.lower().endswith(".gguf")),
    )


def _checked_remote_file(path: object, size: object, sha256: object, server: str) -> RemoteFile:
    """One listing entry held to the hub's forms: a relative file path, a byte count, a sha256."""
    require(path, file_name_problem, kind="the file name", server=server)
    if size is not None:
        require(size, size_problem, kind=f"the size of {path}", server=server)
    if sha256 is not None:
        require(sha256, sha256_problem, kind=f"the LFS sha256 of {path}", server=server)
    split = split_part(path)  # type: ignore[arg-type]
    if split is not None and not 1 <= split[1] <= split[2]:
        raise refused("the split part name", path, f"numbers part {split[1]} of {split[2]}", server=server)
    return RemoteFile(path=path, size_bytes=size, sha256=sha256)  # type: ignore[arg-type]
