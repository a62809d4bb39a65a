"""One file's metadata from the hub's resolve request (commit, ETag, size, where the bytes are), held to the hub's forms."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from workbench.core.hub.client import HubConnection, hub_errors
from workbench.core.hub.names import (
    TRUSTED_FIX,
    HubAnswerRefused,
    commit_problem,
    etag_blob_name,
    etag_problem,
    refused,
    require,
    size_problem,
)


@dataclass(frozen=True)
class FileMetadata:
    """What get_hf_file_metadata reported, every value checked: safe to use in a cache path."""

    commit: str | None  # X-Repo-Commit: 40 lowercase hex
    blob: str | None  # the ETag (X-Linked-Etag for LFS) as a blob name: sha256 or git sha1, lowercase hex
    size: int | None  # X-Linked-Size (else Content-Length)
    location: str  # where the bytes are (the CDN after the hub's redirect): an http(s) URL


def file_metadata(conn: HubConnection, repo: str, path: str, revision: str, *, need_etag: bool) -> FileMetadata:
    """HEAD the file's resolve URL and check what came back; HubAnswerRefused for a value in no hub form."""
    from huggingface_hub import (  # deferred: importing huggingface_hub costs start-up time
        get_hf_file_metadata,
        hf_hub_url,
    )

    server = conn.endpoint
    url = hf_hub_url(repo, path, revision=revision, endpoint=server)
    with hub_errors(conn, repo=repo, filename=path):
        try:
            meta = get_hf_file_metadata(url, token=conn.token or False, timeout=conn.timeout(), endpoint=server)
        except (TypeError, ValueError) as error:  # e.g. X-Linked-Size that is not a number
            raise HubAnswerRefused(
                f"the hub at {server} answered the metadata of {repo}/{path} with headers huggingface_hub cannot read ({type(error).__name__})",
                fix=TRUSTED_FIX,
            ) from None
    blob = None
    if meta.etag is not None or need_etag:
        require(meta.etag, etag_problem, kind=f"the ETag of {path}", server=server)
        blob = etag_blob_name(meta.etag)
    if meta.commit_hash is not None:
        require(meta.commit_hash, commit_problem, kind=f"the commit of {path}", server=server)
    if meta.size is not None:
        require(meta.size, size_problem, kind=f"the size of {path}", server=server)
    location = meta.location
    if not isinstance(location, str) or urlsplit(location).scheme not in ("http", "https"):
        raise refused(f"the download location of {path}", location, "is not an http(s) address", server=server)
    return FileMetadata(commit=meta.commit_hash, blob=blob, size=meta.size, location=location)
