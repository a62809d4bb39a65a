"""A Hugging Face hub look-alike on 127.0.0.1 for tests: the endpoints huggingface_hub calls, plus faults.

Endpoints (what `workbench.core.hub` asks through huggingface_hub):
  GET  /api/models?search=&filter=&sort=downloads&limit=   search (HfApi.list_models' request)
  GET  /api/models/{repo}[/revision/{rev}]?blobs=true       model info with siblings, sizes, LFS sha256
  HEAD/GET /{repo}/resolve/{rev}/{path}                    302 to the "CDN" with X-Repo-Commit,
                                                           X-Linked-Etag, X-Linked-Size (get_hf_file_metadata)
  HEAD/GET /cdn/{sha256}                                   the bytes, with Range -> 206 + Content-Range
The CDN is the same server under another host name (localhost vs 127.0.0.1), so the
client sees a cross-origin redirect exactly as with the real hub and its CDN.

Faults per file: cut the connection after N bytes, stall after N bytes (until released),
corrupt a byte, send more than announced or never stop, answer with a status (5xx), and
gated repositories answer 401/403 with X-Error-Code: GatedRepo. A hostile mirror is a repo
with `hostile` answers: its model info, file listing and resolve headers replaced by any
JSON/header values a test (or the fuzz test) chooses. Every request is recorded with the
bytes of body it sent, and the server signals what it did (`events`: stalled, cut, the
client hung up) so tests wait for the server instead of guessing with timeouts.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

SEND_CHUNK = 64 * 1024


@dataclass
class Fault:
    """What goes wrong when a file's bytes are served; applies to the next `times` GETs (None: all)."""

    cut_after: int | None = None  # close the connection after this many body bytes
    stall_after: int | None = None  # stop sending after this many body bytes ...
    stall_seconds: float = 60.0  # ... for this long (or until released, or the server stops)
    release: threading.Event | None = None  # set it to end the stall early: the body goes on ...
    cut_on_release: bool = False  # ... or the connection drops, as a link that dies after hanging
    corrupt_at: int | None = None  # flip the byte at this file offset
    status: int | None = None  # answer the resolve request with this status instead
    oversend: int | None = None  # send this many bytes more than the range, announced in Content-Length
    endless: bool = False  # no Content-Length: the file's bytes, then filler until the client hangs up
    times: int | None = 1


@dataclass
class Hostile:
    """A mirror's lies about one repository: values sent as given, whatever their type or form."""

    info: dict = field(default_factory=dict)  # merged over the model info JSON ("id", "sha", ...)
    siblings: list | None = None  # the file listing, raw
    resolve_headers: dict = field(default_factory=dict)  # header -> value (None: leave the header out)
    serve: str | None = None  # the served file answering a resolve of any path
    endless_listing: bool = False  # the model info never ends: '{"siblings": [' then entries until the client hangs up


@dataclass
class ServedFile:
    path: str
    source: Path
    size: int
    sha256: str


@dataclass
class Repo:
    repo: str
    commit: str
    files: dict[str, ServedFile]
    gated: bool = False
    downloads: int = 0
    likes: int = 0
    tags: tuple[str, ...] = ("gguf",)
    extra_files: dict[str, bytes] = field(default_factory=dict)  # small non-LFS files (README.md)
    hostile: Hostile | None = None


@dataclass
class RequestRecord:
    """One request, recorded when it arrives and updated while its body is sent."""

    method: str
    path: str
    range: str | None
    authorization: str | None
    status: int = 0
    body_bytes: int = 0


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class HubServer:
    """Start with `with HubServer() as hub:`; `hub.url` is the HF_ENDPOINT to use."""

    def __init__(self, *, cdn_host: str = "localhost") -> None:
        self.repos: dict[str, Repo] = {}
        self.faults: dict[tuple[str, str], Fault] = {}
        self.requests: list[RequestRecord] = []
        self.tokens_with_access: set[str] = set()
        self.cdn_host = cdn_host
        self.ignore_range = False  # answer Range requests with the whole file (200), as some proxies do
        self.api_status: int | None = None  # answer every /api/ request with this status (a failing hub)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        # What the server did, for tests to wait on (never a sleep): a stall began, a
        # connection was cut, a client hung up on a body that was still being sent.
        self.events = {"stalled": threading.Event(), "cut": threading.Event(), "hung_up": threading.Event()}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- set-up --------------------------------------------------------------------------
    def add_repo(self, repo: str, files: dict[str, Path], *, gated: bool = False, downloads: int = 0, likes: int = 0,
                 tags: tuple[str, ...] = ("gguf",), extra_files: dict[str, bytes] | None = None,
                 sha256s: dict[str, str] | None = None) -> Repo:
        served = {}
        for name, source in files.items():
            sha = (sha256s or {}).get(name) or sha256_of(source)
            served[name] = ServedFile(name, Path(source), Path(source).stat().st_size, sha)
        commit = hashlib.sha1(repo.encode() + b"".join(f.sha256.encode() for f in served.values())).hexdigest()
        entry = Repo(repo, commit, served, gated, downloads, likes, tags, dict(extra_files or {}))
        self.repos[repo] = entry
        return entry

    def set_fault(self, repo: str, path: str, fault: Fault) -> None:
        with self._lock:
            self.faults[(repo, path)] = fault

    # -- running -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> HubServer:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- what happened -------------------------------------------------------------------
    def file_requests(self, method: str = "GET") -> list[RequestRecord]:
        return [r for r in self.requests if r.method == method and r.path.startswith("/cdn/")]

    def body_bytes_sent(self, method: str = "GET") -> int:
        return sum(r.body_bytes for r in self.file_requests(method))

    # -- internals -----------------------------------------------------------------------
    def _take_fault(self, repo: str, path: str) -> Fault | None:
        with self._lock:
            fault = self.faults.get((repo, path))
            if fault is None:
                return None
            if fault.times is not None:
                fault.times -= 1
                if fault.times <= 0:
                    del self.faults[(repo, path)]
            return fault

    def _peek_fault(self, repo: str, path: str) -> Fault | None:
        with self._lock:
            return self.faults.get((repo, path))

    def _log(self, record: RequestRecord) -> None:
        with self._lock:
            self.requests.append(record)

    def _find_blob(self, sha256: str) -> tuple[Repo, ServedFile] | None:
        for repo in self.repos.values():
            for served in repo.files.values():
                if served.sha256 == sha256:
                    return repo, served
        return None


def closed_port_url() -> str:
    """An endpoint where nothing listens: a port bound and released, so connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _handler_for(hub: HubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args) -> None:  # noqa: A002 - quiet test output
            pass

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in separate writes: without NODELAY, Nagle holds the body
            # until the client's delayed ACK (40 ms a request), which only slows every test.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def handle(self) -> None:
            try:
                super().handle()
            except (ConnectionResetError, BrokenPipeError):  # a client that hung up mid-answer: its choice
                self.close_connection = True

        def do_HEAD(self) -> None:
            self._route(head=True)

        def do_GET(self) -> None:
            self._route(head=False)

        # -- routing --------------------------------------------------------------------
        def _route(self, *, head: bool) -> None:
            split = urlsplit(self.path)
            path = unquote(split.path)
            query = parse_qs(split.query)
            self._record = RequestRecord("HEAD" if head else "GET", path, self.headers.get("Range"), self.headers.get("Authorization"))
            hub._log(self._record)
            try:
                if path.startswith("/api/") and hub.api_status is not None:
                    self._error(hub.api_status, "Internal Error - We're working hard to fix this as soon as possible!")
                elif path == "/api/models":
                    self._search(query)
                elif path.startswith("/api/models/"):
                    self._model_info(path[len("/api/models/"):])
                elif path.startswith("/cdn/"):
                    self._blob(path[len("/cdn/"):], head=head)
                elif "/resolve/" in path:
                    self._resolve(split.path.lstrip("/"), head=head)  # still quoted: a revision may hold an encoded '/' 
                else:
                    self._error(404, "Not found")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _search(self, query: dict[str, list[str]]) -> None:
            text = (query.get("search") or [""])[0].lower()
            wanted_tags = query.get("filter") or []
            limit = int((query.get("limit") or ["1000"])[0])
            hits = [r for r in hub.repos.values() if text in r.repo.lower() and all(t in r.tags for t in wanted_tags)]
            if (query.get("sort") or [""])[0] == "downloads":
                hits.sort(key=lambda r: -r.downloads)
            body = [
                {"_id": r.commit[:24], "id": r.repo, "modelId": r.repo, "downloads": r.downloads, "likes": r.likes,
                 "gated": "manual" if r.gated else False, "private": False, "tags": list(r.tags),
                 "lastModified": "2024-10-01T12:00:00.000Z", "library_name": "gguf", "createdAt": "2024-09-01T12:00:00.000Z"}
                for r in hits[:limit]
            ]
            self._json(200, body)

        def _model_info(self, rest: str) -> None:
            repo_id, _, revision = rest.partition("/revision/")
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(404, "Repository not found", code="RepoNotFound")
                return
            if revision and revision not in ("main", repo.commit, *self._hostile_commit(repo)):
                self._error(404, "Invalid rev id", code="RevisionNotFound")
                return
            if repo.hostile is not None and repo.hostile.endless_listing:
                self._endless_listing()
                return
            if repo.hostile is not None and repo.hostile.siblings is not None:
                self._json(200, {"_id": repo.commit[:24], "id": repo.repo, "sha": repo.commit, "private": False,
                                 "siblings": repo.hostile.siblings, **repo.hostile.info})
                return
            siblings = [
                {"rfilename": f.path, "size": f.size, "blobId": hashlib.sha1(f.sha256.encode()).hexdigest(),
                 "lfs": {"sha256": f.sha256, "size": f.size, "pointerSize": 135}}
                for f in repo.files.values()
            ] + [{"rfilename": name, "size": len(data), "blobId": hashlib.sha1(data).hexdigest()} for name, data in repo.extra_files.items()]
            self._json(200, {"_id": repo.commit[:24], "id": repo.repo, "modelId": repo.repo, "sha": repo.commit,
                             "gated": "manual" if repo.gated else False, "private": False, "disabled": False,
                             "downloads": repo.downloads, "likes": repo.likes, "tags": list(repo.tags),
                             "lastModified": "2024-10-01T12:00:00.000Z", "siblings": siblings,
                             **(repo.hostile.info if repo.hostile else {})})

        def _endless_listing(self) -> None:
            self._record.status = 200
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            entries = b'{"rfilename": "a.gguf", "size": 1},' * 2048
            try:
                self.wfile.write(b'{"id": "x/y", "siblings": [')
                while not hub._stopping.is_set():
                    self.wfile.write(entries)
                    self._record.body_bytes += len(entries)
            except (BrokenPipeError, ConnectionResetError):
                hub.events["hung_up"].set()
            self.close_connection = True

        def _hostile_commit(self, repo: Repo) -> tuple[str, ...]:
            sha = repo.hostile.info.get("sha") if repo.hostile else None
            return (sha,) if isinstance(sha, str) else ()

        def _resolve(self, rest: str, *, head: bool) -> None:
            repo_part, _, tail = rest.partition("/resolve/")
            revision, _, file_path = tail.partition("/")  # hf_hub_url quotes the revision with safe=""
            repo_part, revision, file_path = unquote(repo_part), unquote(revision), unquote(file_path)
            repo = hub.repos.get(repo_part)
            if repo is None:
                self._error(401, "Repository not found", code="RepoNotFound")
                return
            if revision not in ("main", repo.commit, *self._hostile_commit(repo)):
                self._error(404, "Invalid rev id", code="RevisionNotFound")
                return
            if repo.gated and self._token() not in hub.tokens_with_access:
                status = 403 if self._token() else 401
                self._error(status, f"Access to model {repo.repo} is restricted. You must have access to it and be authenticated to access it. Please log in.", code="GatedRepo")
                return
            served = repo.files.get(file_path)
            if served is None and repo.hostile is not None and repo.hostile.serve is not None:
                served = repo.files[repo.hostile.serve]
            if served is None:
                if file_path in repo.extra_files:
                    self._bytes_body(repo.extra_files[file_path], head=head, extra={"X-Repo-Commit": repo.commit})
                    return
                self._error(404, "Entry not found", code="EntryNotFound")
                return
            fault = hub._peek_fault(repo.repo, served.path)
            if fault is not None and fault.status is not None:
                hub._take_fault(repo.repo, served.path)
                self._error(fault.status, "Internal Error - We're working hard to fix this as soon as possible!")
                return
            self._record.status = 302
            self.send_response(302)
            headers = {
                "Location": f"http://{hub.cdn_host}:{hub.port}/cdn/{served.sha256}",
                "X-Repo-Commit": repo.commit,
                "X-Linked-Etag": f'"{served.sha256}"',
                "X-Linked-Size": str(served.size),
                "ETag": f'"{hashlib.sha1(served.sha256.encode()).hexdigest()}"',
                "Content-Length": "0",
            }
            headers.update(repo.hostile.resolve_headers if repo.hostile else {})
            for key, value in headers.items():
                if value is not None:
                    self.send_header(key, str(value))
            self.end_headers()

        def _blob(self, sha256: str, *, head: bool) -> None:
            found = hub._find_blob(sha256)
            if found is None:
                self._error(404, "Not found")
                return
            repo, served = found
            start, end = 0, served.size - 1
            status = 200
            range_header = self.headers.get("Range")
            if range_header and range_header.startswith("bytes=") and not hub.ignore_range:
                first, _, last = range_header[len("bytes="):].partition("-")
                start = int(first) if first else max(served.size - int(last), 0)
                end = min(int(last), served.size - 1) if (last and first) else served.size - 1
                if start >= served.size:
                    self._record.status = 416
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{served.size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status = 206
            length = end - start + 1
            fault = None if head else hub._take_fault(repo.repo, served.path)
            self._record.status = status
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            if fault and fault.endless:
                self.send_header("Connection", "close")  # the body ends when the connection does
            else:
                self.send_header("Content-Length", str(length + ((fault.oversend or 0) if fault else 0)))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", f'"{served.sha256}"')
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{served.size}")
            self.end_headers()
            if head:
                return
            self._send_file(served.source, start, length, fault)
            if fault and (fault.oversend or fault.endless):
                self._send_filler(fault)

        # -- body writers ---------------------------------------------------------------
        def _send_file(self, source: Path, start: int, length: int, fault: Fault | None) -> None:
            send, action = length, None
            if fault and fault.cut_after is not None and fault.cut_after < send:
                send, action = fault.cut_after, "cut"
            if fault and fault.stall_after is not None and fault.stall_after < send:
                send, action = fault.stall_after, "stall"
            with open(source, "rb") as stream:
                stream.seek(start)
                position = start
                sent = 0
                while sent < send:
                    chunk = bytearray(stream.read(min(SEND_CHUNK, send - sent)))
                    if not chunk:
                        break
                    if fault and fault.corrupt_at is not None and position <= fault.corrupt_at < position + len(chunk):
                        chunk[fault.corrupt_at - position] ^= 0xFF
                    # counted before the write: a client can have the bytes (and a test can
                    # compare counts) before this thread runs again after write()
                    self._record.body_bytes += len(chunk)
                    try:
                        self.wfile.write(chunk)
                    except (BrokenPipeError, ConnectionResetError):
                        self._record.body_bytes -= len(chunk)
                        self.close_connection = True
                        return
                    position += len(chunk)
                    sent += len(chunk)
            if action == "stall":
                self.wfile.flush()
                hub.events["stalled"].set()
                deadline = time.monotonic() + fault.stall_seconds  # type: ignore[union-attr]
                release = fault.release or threading.Event()  # type: ignore[union-attr]
                while time.monotonic() < deadline and not hub._stopping.is_set() and not release.is_set():
                    time.sleep(0.05)
                if release.is_set() and not fault.cut_on_release:  # type: ignore[union-attr] - the rest follows on this connection
                    self._send_file(source, start + send, length - send, None)
                    return
            if action is not None:
                hub.events["cut"].set()
                self._cut()

        def _send_filler(self, fault: Fault) -> None:
            """Bytes past the range: `oversend` of them, or (endless) until the client hangs up."""
            left = fault.oversend if not fault.endless else None
            while (left is None or left > 0) and not hub._stopping.is_set():
                chunk = b"\xab" * (SEND_CHUNK if left is None else min(SEND_CHUNK, left))
                self._record.body_bytes += len(chunk)
                try:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    self._record.body_bytes -= len(chunk)
                    hub.events["hung_up"].set()
                    self.close_connection = True
                    return
                if left is not None:
                    left -= len(chunk)
            if fault.endless:
                self.close_connection = True

        def _cut(self) -> None:
            """Drop the connection mid-body, as a failing link would."""
            try:
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.close_connection = True

        def _bytes_body(self, data: bytes, *, head: bool, extra: dict[str, str] | None = None) -> None:
            self._record.status = 200
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if not head:
                self._record.body_bytes = len(data)
                self.wfile.write(data)

        def _json(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self._record.status = status
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self._record.body_bytes = len(data)
                self.wfile.write(data)

        def _error(self, status: int, message: str, *, code: str | None = None) -> None:
            data = json.dumps({"error": message}).encode()
            self._record.status = status
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Error-Message", message)
            if code:
                self.send_header("X-Error-Code", code)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _token(self) -> str | None:
            value = self.headers.get("Authorization") or ""
            return value[len("Bearer "):] if value.startswith("Bearer ") else None

    return Handler


# -- pytest fixtures (import them into a test module: `from hubserver import hub`) ---------------
import pytest  # noqa: E402 - the server above is usable without pytest


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A running hub server with HF_ENDPOINT pointing at it and every cache under tmp_path."""
    server = HubServer().start()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "wb-cache"))
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "wb-config"))
    # Generous: on a loaded machine a short read timeout fires on a healthy link and adds a
    # retry no test expects. A test about a stalled link sets its own, and waits on the
    # server's events (`stalled`, `cut`, `hung_up`) rather than on the clock.
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "60")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    yield server
    server.stop()


def hub_cache(tmp_path: Path) -> Path:
    return tmp_path / "hf" / "hub"


def tree_outside_caches(tmp_path: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every entry under tmp_path except inside the two caches: type and content (or link target)."""
    caches = (tmp_path / "hf" / "hub", tmp_path / "wb-cache")
    found = {}
    for folder, dirs, files in os.walk(tmp_path):
        here = Path(folder)
        if any(here == cache or cache in here.parents for cache in caches):
            dirs[:] = []
            continue
        for name in dirs + files:
            path = here / name
            if any(path == cache for cache in caches) or any(cache in path.parents for cache in caches):
                continue
            if path.is_symlink():
                found[str(path)] = ("link", os.readlink(path))
            elif path.is_file():
                found[str(path)] = ("file", path.read_bytes())
            else:
                found[str(path)] = ("dir", b"")
    return found
