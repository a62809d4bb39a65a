"""The short forms users type for a hub model: `owner/repo` and `owner/repo:Q4_K_M` (llama.cpp's -hf, Ollama's hf.co/).

Without a tag the file is llama.cpp's default pick: the Q4_K_M file, else the only GGUF file
of the repository; the tag matches a file's quantization type case-insensitively. With a
device, `workbench download` lets the fit search (core.fit) pick among the files (of the tag).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from workbench.core.errors import HubError
from workbench.core.files.safe_paths import shown_value
from workbench.core.hub.files import GGUFFile, RepoFiles, normalise_quant
from workbench.core.hub.names import user_repo_id

DEFAULT_QUANT = "Q4_K_M"  # llama.cpp's -hf and the hub's "latest" tag pick this file when there is one
MAX_REF_CHARS = 240
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,31}$", re.ASCII)
_HOST_PREFIXES = ("hf.co/", "huggingface.co/", "https://huggingface.co/", "https://hf.co/")
FORM_FIX = "Give it as owner/repo or owner/repo:QUANT, e.g. bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M"


@dataclass(frozen=True)
class ShortRef:
    repo: str
    tag: str  # "" when none was given


def parse_short_ref(text: str) -> ShortRef:
    """`owner/repo[:TAG]` (an hf.co/ prefix allowed) checked to the hub's forms; HubError naming the value."""
    if not isinstance(text, str) or len(text) > MAX_REF_CHARS:
        raise HubError(f"{shown_value(text)} is not a model reference: longer than {MAX_REF_CHARS} characters", fix=FORM_FIX)
    value = text.strip()
    for prefix in _HOST_PREFIXES:
        if value.lower().startswith(prefix):
            value = value[len(prefix):]
            break
    repo, _, tag = value.partition(":")
    if ":" in value and not _TAG.match(tag):
        raise HubError(f"{shown_value(tag)} is not a quantization tag: it may hold only letters, digits, '_', '.' and '-', "
                       "32 characters at most", where=shown_value(text), fix=FORM_FIX)
    return ShortRef(user_repo_id(repo), tag)


def pick_file(listing: RepoFiles, tag: str) -> GGUFFile:
    """The file a short form names: the tag's quantization type, or the default pick without one."""
    if tag and tag.lower() != "latest":
        matches = _of_quant(listing, tag)
        if not matches:
            raise HubError(f"no {normalise_quant(tag)} file in {listing.repo}", fix=f"Tags it has: {_tags(listing)}")
        if len(matches) > 1:
            raise HubError(f"{len(matches)} files in {listing.repo} are {normalise_quant(tag)}: "
                           f"{', '.join(f.name for f in matches[:8])}", fix="Name the file instead")
        return matches[0]
    default = _of_quant(listing, DEFAULT_QUANT)
    if len(default) == 1:
        return default[0]
    if len(listing.files) == 1:
        return listing.files[0]
    if not listing.files:
        raise HubError(f"{listing.repo} has no GGUF file", fix="Pick a repository with GGUF files (`workbench search`)")
    raise HubError(f"{listing.repo} has no single {DEFAULT_QUANT} file to pick by default",
                   fix=f"Add a tag, e.g. {listing.repo}:{_first_tag(listing)} (tags it has: {_tags(listing)}), or pass --device")


def files_of_tag(listing: RepoFiles, tag: str) -> RepoFiles:
    """The listing narrowed to the tag's files (all of them without a tag, or with 'latest')."""
    if not tag or tag.lower() == "latest":
        return listing
    matches = _of_quant(listing, tag)
    if not matches:
        raise HubError(f"no {normalise_quant(tag)} file in {listing.repo}", fix=f"Tags it has: {_tags(listing)}")
    return dataclasses.replace(listing, files=tuple(matches))


def _of_quant(listing: RepoFiles, tag: str) -> list[GGUFFile]:
    wanted = normalise_quant(tag)
    return [f for f in listing.files if f.quant == wanted]


def _tags(listing: RepoFiles) -> str:
    return ", ".join(sorted({f.quant for f in listing.files if f.quant})[:24]) or "none recognised"


def _first_tag(listing: RepoFiles) -> str:
    return next((f.quant for f in listing.files if f.quant), "Q8_0")
