"""Find GGUF repositories: a text search of the hub sorted by downloads, and the curated edge list."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass

from workbench.core.errors import HubError
from workbench.core.hub.client import HubConnection, get_json_bounded, hub_connection, hub_errors
from workbench.core.hub.names import TRUSTED_FIX, HubAnswerRefused, refused, repo_id_problem, require
from workbench.core.paths import data_dir

CURATED_FILE = "curated_models.toml"


@dataclass(frozen=True)
class RepoHit:
    """One repository the hub returned for a search."""

    repo: str
    downloads: int | None  # as the hub reports them (last 30 days); None when not given
    likes: int | None
    gated: bool
    last_modified: str  # ISO date, "" when not given
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class CuratedModel:
    """An edge-friendly instruction model from assets/curated_models.toml."""

    name: str
    repo: str
    params: str  # "135M", "1.5B", ...
    suggested_file: str  # the file to start with (usually Q4_K_M)
    gated: bool
    licence: str
    note: str


def search_gguf_repos(text: str, *, limit: int = 20, connection: HubConnection | None = None) -> tuple[RepoHit, ...]:
    """Repositories tagged gguf whose name matches `text`, most downloaded first.

    This is the request `HfApi.list_models(search=, filter="gguf", sort="downloads", limit=)`
    sends, made once: list_models' paginator retries a refused connection five times
    with back-off (about 23 s), the silent hang an engineer in the field must not get.
    The JSON is parsed by huggingface_hub's own ModelInfo.
    """
    from huggingface_hub.hf_api import ModelInfo as HubModelInfo  # deferred: importing huggingface_hub costs start-up time

    conn = connection or hub_connection()
    conn.check_online()
    if limit < 1:
        raise HubError(f"--limit must be at least 1, not {limit}", fix="Ask for one or more results")
    url = f"{conn.endpoint}/api/models"
    params = {"search": text.strip(), "filter": "gguf", "sort": "downloads", "limit": limit}
    with hub_errors(conn):
        items = get_json_bounded(conn, url, params=params, what="the search")
    if not isinstance(items, list):
        raise HubError(f"the hub at {conn.endpoint} answered the search with something that is not a list", fix="Check HF_ENDPOINT points at a Hugging Face hub or mirror")
    hits = []
    for item in items[:limit]:
        try:
            info = HubModelInfo(**item)
            last_modified = info.last_modified.date().isoformat() if info.last_modified else ""
            hit = RepoHit(repo=info.id, downloads=info.downloads, likes=info.likes, gated=bool(info.gated),
                          last_modified=last_modified, tags=tuple(info.tags or ()))
        except (TypeError, KeyError, ValueError, AttributeError) as error:
            raise HubAnswerRefused(f"the hub at {conn.endpoint} answered the search with an entry that is not a repository ({type(error).__name__})", fix=TRUSTED_FIX) from None
        # A repository id from the search is later joined to cache folders: the hub's form only.
        require(hit.repo, repo_id_problem, kind="the repository id", server=conn.endpoint)
        for count, label in ((hit.downloads, "download count"), (hit.likes, "like count")):
            if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
                raise refused(f"the {label} of {hit.repo}", count, "is not a whole number", server=conn.endpoint)
        hits.append(hit)
    # The hub sorts already; sorting again keeps a mirror that ignores `sort` honest.
    return tuple(sorted(hits, key=lambda hit: -(hit.downloads or 0)))


def curated_models() -> tuple[CuratedModel, ...]:
    """The shipped short list of edge-friendly instruction models, in file order."""
    path = data_dir("assets") / CURATED_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HubError("the curated model list is missing", where=str(path), fix="Reinstall the workbench") from None
    except tomllib.TOMLDecodeError as error:
        raise HubError(f"not valid TOML ({error})", where=str(path), fix="Fix the file or reinstall the workbench") from None
    models = []
    for index, entry in enumerate(data.get("model", ())):
        try:
            models.append(
                CuratedModel(
                    name=str(entry["name"]),
                    repo=str(entry["repo"]),
                    params=str(entry["params"]),
                    suggested_file=str(entry["suggested_file"]),
                    gated=bool(entry.get("gated", False)),
                    licence=str(entry.get("licence", "")),
                    note=str(entry.get("note", "")),
                )
            )
        except KeyError as missing:
            raise HubError(f"model entry {index + 1} lacks {missing}", where=str(path), fix="Give every [[model]] name, repo, params and suggested_file") from None
    return tuple(models)
