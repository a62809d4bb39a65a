"""One connection to the Hugging Face hub (or a mirror): endpoint, token, timeouts, errors as HubError."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2

from workbench.core.errors import HubError
from workbench.core.units import MIB

DEFAULT_ENDPOINT = "https://huggingface.co"
CONNECT_TIMEOUT_S = 4.0  # an unreachable hub must be reported within a few seconds, not after 20
DEFAULT_READ_TIMEOUT_S = 10.0
OFFLINE_FIX = "Use cached, local or bundled models (`workbench models`)"


class HubUnreachable(HubError):
    """The hub did not answer at all (refused, no route, DNS, timeout)."""


class HubServerFailed(HubError):
    """The hub answered with a 5xx: worth retrying later."""


@dataclass(frozen=True)
class HubConnection:
    """Where the hub is and how to talk to it, read from the environment at call time.

    huggingface_hub reads HF_ENDPOINT once at import; we read it on every call so a
    mirror set later (or by a test) is honoured.
    """

    endpoint: str
    token: str | None
    read_timeout_s: float
    offline: bool

    def timeout(self, read_timeout_s: float | None = None) -> Any:
        read = read_timeout_s if read_timeout_s is not None else self.read_timeout_s
        return httpx2.Timeout(read, connect=min(CONNECT_TIMEOUT_S, read))

    def headers(self, url: str | None = None) -> dict[str, str]:
        """The hub's own request headers (user agent, token); no token for other hosts (a CDN)."""
        from huggingface_hub.utils import build_hf_headers  # deferred: importing huggingface_hub costs start-up time

        headers = build_hf_headers(token=self.token or False)
        if url is not None and not same_origin(url, self.endpoint):
            headers.pop("authorization", None)
            headers.pop("Authorization", None)
        return headers

    def api(self) -> Any:
        from huggingface_hub import HfApi  # deferred: importing huggingface_hub costs start-up time

        return HfApi(endpoint=self.endpoint, token=self.token or False)

    def session(self) -> Any:
        from huggingface_hub.utils import get_session  # deferred: importing huggingface_hub costs start-up time

        return get_session()

    def check_online(self) -> None:
        if self.offline:
            raise HubError("offline mode is on (HF_HUB_OFFLINE is set)", fix=OFFLINE_FIX)


def hub_connection() -> HubConnection:
    """The connection the environment describes: HF_ENDPOINT, HF_TOKEN, HF_HUB_DOWNLOAD_TIMEOUT, HF_HUB_OFFLINE."""
    from huggingface_hub import get_token  # deferred: importing huggingface_hub costs start-up time

    _skip_agent_registry_fetch()
    endpoint = os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or DEFAULT_ENDPOINT
    try:
        read_timeout = float(os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT", "") or DEFAULT_READ_TIMEOUT_S)
    except ValueError:
        read_timeout = DEFAULT_READ_TIMEOUT_S
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    return HubConnection(endpoint=endpoint, token=get_token(), read_timeout_s=read_timeout, offline=offline)


def _skip_agent_registry_fetch() -> None:
    """Stop huggingface_hub's hidden first request.

    huggingface_hub 2.x builds its user agent with an "agent harness" registry that it
    fetches from the hub the first time any request is made (3 s timeout, from the
    endpoint read at import, not HF_ENDPOINT now). Offline that is one more request
    before each command's own, and a hub that accepts but never answers costs 3 s more
    before the "unreachable" line. That part of the user agent is telemetry, which the
    workbench does not send.
    """
    from huggingface_hub import constants  # deferred: importing huggingface_hub costs start-up time

    constants.HF_HUB_DISABLE_TELEMETRY = True


def same_origin(url: str, other: str) -> bool:
    a, b = urlsplit(url), urlsplit(other)
    return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)


@contextmanager
def hub_errors(connection: HubConnection, *, repo: str = "", filename: str = "") -> Iterator[None]:
    """Turn whatever huggingface_hub or the HTTP layer raises into one HubError line."""
    try:
        yield
    except HubError:
        raise
    except Exception as error:  # noqa: BLE001 - every failure below becomes one clear line
        translated = translate_error(error, connection, repo=repo, filename=filename)
        if translated is None:
            raise
        raise translated from None


def translate_error(error: BaseException, connection: HubConnection, *, repo: str = "", filename: str = "") -> HubError | None:
    """The HubError for a hub or network failure, or None when it is neither."""
    from huggingface_hub import errors as hf  # deferred: importing huggingface_hub costs start-up time

    where = f"{repo}/{filename}" if repo and filename else repo
    repo_page = f"{connection.endpoint}/{repo}"
    if isinstance(error, hf.GatedRepoError):
        status = _status(error)
        refused = "refused with your token" if connection.token else "needs a token"
        return HubError(
            f"{repo} is a gated repository: access {refused} (HTTP {status})",
            where=where,
            fix=f"Accept its licence at {repo_page} while logged in, then set HF_TOKEN to a token of that account",
        )
    if isinstance(error, hf.RepositoryNotFoundError):
        return HubError(
            f"no repository {repo} on {connection.endpoint} (or it is private)",
            fix="Check the name with `workbench search TEXT`; a private repository needs HF_TOKEN",
        )
    if isinstance(error, hf.RevisionNotFoundError):
        return HubError("no such revision", where=where, fix="Use the main branch or a commit the repository has")
    if isinstance(error, hf.EntryNotFoundError):
        return HubError(
            f"no file {filename} in {repo}",
            fix=f"List its files with `workbench files {repo}`",
        )
    if isinstance(error, hf.OfflineModeIsEnabled):
        return HubError("offline mode is on (HF_HUB_OFFLINE is set)", fix=OFFLINE_FIX)
    if isinstance(error, hf.HfHubHTTPError):
        status = _status(error)
        if status in (401, 403):
            return HubError(
                f"the hub refused the request (HTTP {status})",
                where=where or connection.endpoint,
                fix="Set HF_TOKEN to a token with read access; for a gated model accept its licence on the hub first",
            )
        if status is not None and status >= 500:
            return HubServerFailed(
                f"the hub at {connection.endpoint} failed (HTTP {status})",
                where=where,
                fix=f"Try again later. {OFFLINE_FIX}",
            )
        return HubError(f"the hub answered HTTP {status}", where=where or connection.endpoint, fix=OFFLINE_FIX)
    if isinstance(error, httpx2.TransportError):
        return unreachable(connection, error)
    return None


ERROR_BODY_LIMIT = 64 * 1024  # an error page larger than this is not read: a hostile one may never end


def raise_for_status_bounded(response: Any, *, where: str = "") -> None:
    """huggingface_hub's error for a failed streamed response, reading its body only when it is
    announced small; otherwise an error from the status alone (5xx: HubServerFailed)."""
    from huggingface_hub.utils import hf_raise_for_status  # deferred: importing huggingface_hub costs start-up time

    if response.status_code < 400:
        return
    text = response.headers.get("Content-Length", "")
    if text.isdigit() and int(text) <= ERROR_BODY_LIMIT:
        response.read()
        hf_raise_for_status(response)
    status = response.status_code
    failure = HubServerFailed if status >= 500 else HubError
    raise failure(f"the server answered HTTP {status}", where=where, fix="Try again later or use another mirror (HF_ENDPOINT)")


# A listing of 10,000 files (with LFS hashes) is ~2 MB of JSON; GGUF repositories hold tens. Parsed,
# 8 MB of the smallest entries a hostile server could send becomes ~100 MB of Python objects: the bound.
MAX_ANSWER_BYTES = 8 * MIB


def get_json_bounded(connection: HubConnection, url: str, *, params: dict[str, Any] | None = None, what: str) -> Any:
    """GET a JSON answer of the hub API, refusing one larger than MAX_ANSWER_BYTES before it fills memory.

    HubError for the hub's own errors; network failures are left for hub_errors to translate.
    """
    with connection.session().stream("GET", url, params=params, headers=connection.headers(url), timeout=connection.timeout()) as response:
        raise_for_status_bounded(response, where=url)
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > MAX_ANSWER_BYTES:
                raise HubError(
                    f"the hub at {connection.endpoint} sent more than {MAX_ANSWER_BYTES // MIB} MB for {what}; refused",
                    fix="Check that HF_ENDPOINT points at the Hugging Face hub or a mirror you trust",
                )
    try:
        return json.loads(bytes(body))
    except (ValueError, RecursionError):  # '[' * 100_000 is 100 kB: the decoder recurses once per level
        raise HubError(f"the hub at {connection.endpoint} answered {what} with something that is not JSON",
                       fix="Check that HF_ENDPOINT points at the Hugging Face hub or a mirror you trust") from None


def unreachable(connection: HubConnection, error: BaseException) -> HubError:
    reason = str(error).strip() or type(error).__name__
    return HubUnreachable(f"Hugging Face hub unreachable at {connection.endpoint}: {reason}", fix=OFFLINE_FIX)


def _status(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None)
