"""ASGI middleware between the API and web pages: a foreign Host (DNS rebinding) is 421, a foreign Origin 403."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse

from workbench.core.config.web_boundary import WebBoundary


class BrowserGuard:
    """Answers only requests addressed to this server (Host) and not sent by a foreign page (Origin).

    A page on any site can POST to http://127.0.0.1:8080 from a visitor's browser, and through
    DNS rebinding read the answers; both requests carry the page's own name in Host or Origin.
    Origins named with --allow-origin get CORS headers, so a page there can use the API.
    """

    def __init__(self, app: Any, boundary: WebBoundary) -> None:
        self.boundary = boundary
        self.app = app
        if boundary.extra_origins:
            self.app = CORSMiddleware(app, allow_origins=list(boundary.extra_origins), allow_methods=["GET", "POST"],
                                      allow_headers=["authorization", "content-type"], max_age=600)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self.boundary.host_refusal(headers.get("host"))
        if refusal is not None:
            await _refuse(421, refusal, "misdirected_request", scope, receive, send)
            return
        port = (scope.get("server") or ("", 0))[1] or 0
        refusal = self.boundary.origin_refusal(headers.get("origin"), port)
        if refusal is not None:
            await _refuse(403, refusal, "origin_not_allowed", scope, receive, send)
            return
        await self.app(scope, receive, send)


async def _refuse(status: int, message: str, code: str, scope: Any, receive: Any, send: Any) -> None:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
    await JSONResponse(body, status_code=status, headers={"Connection": "close"})(scope, receive, send)
