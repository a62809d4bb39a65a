"""textual-serve with the checks a browser-facing server needs: Origin, a session limit, sane sizes."""

from __future__ import annotations

from typing import Any

from aiohttp import WSMsgType, web
from textual_serve.server import Server

from workbench.core.config.web_boundary import WebBoundary

# A terminal larger than this is no screen anyone has; the numbers size the app's buffers.
MAX_COLUMNS, MAX_ROWS = 500, 200
MIN_COLUMNS, MIN_ROWS = 20, 8


def clamp_size(value: Any, default: int, low: int, high: int) -> int:
    """A terminal dimension from a browser: an int within [low, high], else the default."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return min(high, max(low, number))


class SessionLimit:
    """Counts live browser sessions; each one is an app process with its own engine."""

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.active = 0

    @property
    def full(self) -> bool:
        return self.active >= self.maximum


def _full_page(maximum: int) -> str:
    return (
        "<!doctype html><title>Edge LLM Workbench: busy</title>"
        "<body style='font-family: sans-serif; margin: 3em'>"
        f"<h1>All {maximum} session(s) of this workbench are in use</h1>"
        "<p>Every browser session runs its own app and model engine, so the server limits them "
        "(<code>workbench serve --max-sessions N</code>). Close another tab that shows the workbench, "
        "or try again in a minute.</p></body>"
    )


class GuardedServer(Server):
    """textual-serve's Server, refusing cross-site WebSockets and sessions beyond the limit."""

    def __init__(self, command: str, *, host: str, port: int, max_sessions: int, origins: frozenset[str],
                 allow_hosts: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(command, host=host, port=port, **kwargs)
        self.origins = origins
        # Host names answered (a DNS-rebound name gets 421); origins stay `origins`, the same rule
        self.boundary = WebBoundary.serving(host, extra_names=allow_hosts)
        self.sessions = SessionLimit(max_sessions)

    async def handle_index(self, request: web.Request) -> Any:
        refusal = self.boundary.host_refusal(request.headers.get("Host"))
        if refusal is not None:
            return web.Response(status=421, text=refusal)
        if self.sessions.full:
            return web.Response(status=503, text=_full_page(self.sessions.maximum), content_type="text/html",
                                headers={"Retry-After": "60"})
        return await super().handle_index(request)

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        refusal = self.boundary.host_refusal(request.headers.get("Host"))
        if refusal is not None:
            return web.Response(status=421, text=refusal)
        origin = request.headers.get("Origin")
        # Browsers always send Origin on a WebSocket; a page from another site must not drive
        # the app (it can download models, write presets, run the engine). A non-browser client
        # can send any Origin it likes, so a missing one is no extra risk; the session limit
        # bounds what such a client can start.
        if origin is not None and origin.rstrip("/").lower() not in self.origins:
            return web.Response(status=403, text=f"WebSocket from origin {origin[:200]!r} refused: "
                                "only pages served by this workbench may connect")
        if self.sessions.full:
            return web.Response(status=503, text=_full_page(self.sessions.maximum), content_type="text/html",
                                headers={"Retry-After": "60"})
        query = request.query
        request = request.clone(rel_url=request.rel_url.with_query({
            "width": str(clamp_size(query.get("width"), 80, MIN_COLUMNS, MAX_COLUMNS)),
            "height": str(clamp_size(query.get("height"), 24, MIN_ROWS, MAX_ROWS)),
        }))
        self.sessions.active += 1
        try:
            return await super().handle_websocket(request)
        finally:
            self.sessions.active -= 1

    async def _process_messages(self, websocket: web.WebSocketResponse, app_service: Any) -> None:
        """Validate each browser message's shape and sizes before textual-serve acts on it."""
        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                envelope = message.json()
            except ValueError:
                continue
            if not isinstance(envelope, list) or not envelope:
                continue
            kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
            if kind == "stdin" and isinstance(data, str):
                await app_service.send_bytes(data.encode("utf-8"))
            elif kind == "resize" and isinstance(data, dict):
                await app_service.set_terminal_size(clamp_size(data.get("width"), 80, MIN_COLUMNS, MAX_COLUMNS),
                                                    clamp_size(data.get("height"), 24, MIN_ROWS, MAX_ROWS))
            elif kind == "ping":
                await websocket.send_json(["pong", data])
            elif kind == "blur":
                await app_service.blur()
            elif kind == "focus":
                await app_service.focus()
