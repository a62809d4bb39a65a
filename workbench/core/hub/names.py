"""The exact forms the Hugging Face hub gives names in (repo ids, revisions, commits, ETags, file paths, sizes), checked where server data enters.

A mirror set through HF_ENDPOINT is outside data: each value it sends becomes part of a
path in the cache (`models--owner--name/blobs/<etag>`, `snapshots/<commit>/<file>`,
`refs/<revision>`), so each is held to the form the real hub uses before anything is
joined, and a value in any other form is refused with one line naming the server.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from workbench.core.errors import HubError
from workbench.core.files.safe_paths import name_problem, shown_value

# huggingface_hub.utils.validate_repo_id: [A-Za-z0-9_.-], starts and ends with a word
# character (its `\b` anchors, ASCII only), the name 1-96 characters, no `--` or `..`, not
# ending `.git`. The workbench always needs the owner/name form (GGUF repositories have owners);
# the owner gets the same 96-character bound as a sanity limit (the hub's is shorter).
_REPO_PART = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.\-]{0,94}[A-Za-z0-9_])?$", re.ASCII)
# huggingface_hub.file_download.REGEX_COMMIT_HASH.
_COMMIT = re.compile(r"^[0-9a-f]{40}$", re.ASCII)
# An LFS file's ETag (X-Linked-Etag) is its sha256; a git-stored file's is its git blob sha1.
_SHA256 = re.compile(r"^[0-9a-f]{64}$", re.ASCII)
_GIT_SHA1 = _COMMIT
# The HTTP forms huggingface_hub's _normalize_etag accepts: "<tag>" or W/"<tag>" (and it tolerates a bare tag).
_ETAG_HEADER = re.compile(r'^(?:W/)?"([^"]*)"$|^([^"]*)$', re.ASCII)
# git check-ref-format: no control characters, space, ~ ^ : ? * [ \ anywhere.
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")

MAX_FILE_NAME_CHARS = 1024  # the hub's longest paths are far shorter; a longer one is a hostile answer
MAX_REVISION_CHARS = 255
MAX_FILE_BYTES = 1 << 40  # 1 TiB: the hub caps one LFS file at 50 GB, so anything above is not a real size
TRUSTED_FIX = "Check that HF_ENDPOINT points at the Hugging Face hub or a mirror you trust"


class HubAnswerRefused(HubError):
    """The hub (or a mirror) sent a value in a form the real hub never uses; nothing was written."""


def repo_id_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not text"
    if value.count("/") != 1:
        return "is not in the form owner/name"
    for part in value.split("/"):
        if not _REPO_PART.match(part):
            return "may hold only letters, digits, '-', '_' and '.', start and end with a letter or digit, 96 characters at most"
    if "--" in value or ".." in value:
        return "contains '--' or '..'"
    if value.endswith(".git"):
        return "ends with '.git'"
    return None


def commit_problem(value: object) -> str | None:
    if not isinstance(value, str) or not _COMMIT.match(value):
        return "is not a commit hash (40 lowercase hex digits)"
    return None


def sha256_problem(value: object) -> str | None:
    if not isinstance(value, str) or not _SHA256.match(value):
        return "is not a sha256 (64 lowercase hex digits)"
    return None


def revision_problem(value: object) -> str | None:
    """A branch, tag or commit as git allows it (check-ref-format), short enough to be a file name."""
    if not isinstance(value, str) or not value:
        return "is empty"
    if len(value) > MAX_REVISION_CHARS:
        return f"is longer than {MAX_REVISION_CHARS} characters"
    if _REF_FORBIDDEN.search(value):
        return "contains a space, a control character or one of ~ ^ : ? * [ \\"
    if value.startswith("/") or value.endswith("/") or "//" in value or ".." in value or "@{" in value or value == "@":
        return "is not a git branch, tag or commit name"
    for component in value.split("/"):
        if component.startswith(".") or component.endswith(".lock") or name_problem(component):
            return "is not a git branch, tag or commit name"
    if value.endswith("."):
        return "is not a git branch, tag or commit name"
    return None


def file_name_problem(value: object) -> str | None:
    """A path inside a repository: relative POSIX names, no `..`/`.`/empty name, no backslash or control character."""
    if not isinstance(value, str) or not value:
        return "is empty"
    if len(value) > MAX_FILE_NAME_CHARS:
        return f"is longer than {MAX_FILE_NAME_CHARS} characters"
    if value.startswith("/"):
        return "is an absolute path"
    if "\\" in value:
        return "contains a backslash"
    for component in value.split("/"):
        problem = name_problem(component)
        if problem:
            return f"has a part that {problem}"
    return None


def size_problem(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"is a {type(value).__name__}, not a whole number of bytes"
    if value < 0 or value > MAX_FILE_BYTES:
        return f"is outside 0 … {MAX_FILE_BYTES} bytes"
    return None


def etag_blob_name(value: object) -> str | None:
    """The blob name an ETag stands for: a sha256 or git sha1 in lowercase hex, from any of
    `<hex>`, `"<hex>"` or `W/"<hex>"`; None for anything else."""
    if not isinstance(value, str):
        return None
    match = _ETAG_HEADER.match(value.strip())
    if not match:
        return None
    tag = match.group(1) if match.group(1) is not None else match.group(2)
    if _SHA256.match(tag) or _GIT_SHA1.match(tag):
        return tag
    return None


def etag_problem(value: object) -> str | None:
    if etag_blob_name(value) is None:
        return "is not a sha256 (64 hex digits) or git sha1 (40 hex digits) ETag"
    return None


def require(value: object, problem: Callable[[object], str | None], *, kind: str, server: str) -> object:
    """`value` when `problem(value)` finds nothing; otherwise HubAnswerRefused naming the server and the value."""
    reason = problem(value)
    if reason is None:
        return value
    raise refused(kind, value, reason, server=server)


def refused(kind: str, value: object, reason: str, *, server: str) -> HubAnswerRefused:
    origin = f"the hub at {server}" if server else "the hub"
    return HubAnswerRefused(f"refused {kind} {shown_value(value)} from {origin}: it {reason}", fix=TRUSTED_FIX)


def user_repo_id(text: str) -> str:
    """A repository id the user typed, trimmed and checked (a HubError that shows the expected form)."""
    repo = text.strip().strip("/") if isinstance(text, str) else text
    problem = repo_id_problem(repo)
    if problem:
        raise HubError(f"{shown_value(repo)} is not a repository id: it {problem}", fix="Give it as owner/name, e.g. Qwen/Qwen2.5-0.5B-Instruct-GGUF")
    return repo  # type: ignore[return-value]


def user_revision(text: str) -> str:
    problem = revision_problem(text)
    if problem:
        raise HubError(f"{shown_value(text)} is not a revision: it {problem}", fix="Give a branch, tag or commit hash, e.g. main")
    return text
