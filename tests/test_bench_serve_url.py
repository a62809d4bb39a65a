"""`workbench bench serve --url`: the server's address with or without /v1 (a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

import json
import re

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from workbench.core.serve.listen import listen
from workbench.core.serve.server_thread import ApiServerThread

SEEN: list[str] = []


async def models(request):
    SEEN.append(request.url.path)
    return JSONResponse({"object": "list", "data": [{"id": "m", "object": "model"}]})


async def completions(request):
    SEEN.append(request.url.path)

    async def chunks():
        for piece in ("a", "b", "c"):
            yield "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": piece}}]}) + "\n\n"
        yield "data: " + json.dumps({"choices": [], "usage": {"completion_tokens": 3}}) + "\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(chunks(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def server_root():
    """An OpenAI-compatible server that, like llama-server and Ollama, answers only under /v1."""
    app = Starlette(routes=[Route("/v1/models", models),
                            Route("/v1/chat/completions", completions, methods=["POST"])])
    server = ApiServerThread(app, listen("127.0.0.1", 0))
    server.start()
    yield server.address.removesuffix("/v1")
    server.stop()


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_the_base_url_works_with_or_without_v1(cli, server_root, suffix):
    SEEN.clear()
    result = cli("bench", "serve", "--url", server_root + suffix, "--clients", "1", "--requests", "1", "-n", "3")
    assert result.returncode == 0, result.stderr
    assert "clients 1: 1/1 answered" in result.stdout
    assert "/v1/chat/completions" in SEEN and "/v1/v1/models" not in SEEN


def test_the_memory_figures_both_carry_their_unit(cli, server_root):
    result = cli("bench", "serve", "--url", server_root, "--clients", "1", "--requests", "1", "-n", "3")
    assert result.returncode == 0, result.stderr
    assert re.search(r"memory used [\d.,]+ (MiB|GiB) of [\d.,]+ GiB", result.stdout), result.stdout


def test_a_url_whose_models_is_missing_with_and_without_v1_still_says_404(cli, server_root):
    result = cli("bench", "serve", "--url", server_root + "/nothing", "--clients", "1")
    assert result.returncode == 2 and f"{server_root}/nothing/models answered HTTP 404" in result.stderr
