"""`workbench bench serve` against a hostile OpenAI-compatible server on 127.0.0.1: it counts, it never hangs or bloats."""

from __future__ import annotations

import asyncio
import json

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from workbench.cli.main import main
from workbench.core.serve.listen import listen
from workbench.core.serve.server_thread import ApiServerThread

MODEL_ID = {"value": "m"}


async def models(_request):
    return JSONResponse({"object": "list", "data": [{"id": MODEL_ID["value"], "object": "model"}]})


async def endless_chunks(_request):
    async def chunks():
        while True:  # far past any max_tokens: the load test must stop reading by itself
            yield "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": "x"}}]}) + "\n\n"
            await asyncio.sleep(0)  # lets this test server notice the client hanging up

    return StreamingResponse(chunks(), media_type="text/event-stream")


async def endless_line(_request):
    async def pieces():
        yield "data: "
        while True:
            yield "y" * 65536  # one line that never ends
            await asyncio.sleep(0)

    return StreamingResponse(pieces(), media_type="text/event-stream")


async def nested_models(_request):
    from starlette.responses import Response

    return Response("[" * 100_000, media_type="application/json")  # 100 kB: under the size bound, past json's depth


@pytest.fixture(scope="module")
def hostile():
    app = Starlette(routes=[
        Route("/nested/v1/models", nested_models),
        Route("/chunks/v1/models", models), Route("/chunks/v1/chat/completions", endless_chunks, methods=["POST"]),
        Route("/line/v1/models", models), Route("/line/v1/chat/completions", endless_line, methods=["POST"]),
    ])
    server = ApiServerThread(app, listen("127.0.0.1", 0))
    server.start()
    yield server.address.removesuffix("/v1")
    server.stop()


def _bench(url: str, capsys) -> tuple[int, list[dict], str]:
    code = main(["bench", "serve", "--url", url, "--clients", "1", "-n", "4", "--requests", "1", "--json"])
    captured = capsys.readouterr()
    return code, [json.loads(line) for line in captured.out.splitlines() if line.startswith("{")], captured.err


def test_a_server_streaming_past_max_tokens_is_counted_as_an_error(hostile, capsys):
    code, levels, _err = _bench(hostile + "/chunks/v1", capsys)
    assert code == 1 and levels[0]["errors"] == 1 and levels[0]["ok"] == 0
    assert "more than 32 chunks for max_tokens 4" in levels[0]["first_error"]  # 4 x 4 + 16, by hand


def test_an_endless_line_is_refused_before_it_fills_memory(hostile, capsys):
    code, levels, _err = _bench(hostile + "/line/v1", capsys)
    assert code == 1 and levels[0]["errors"] == 1
    assert "a line of more than 1000000 bytes" in levels[0]["first_error"]


def test_a_model_id_that_is_no_name_is_refused_in_one_line(hostile, capsys):
    MODEL_ID["value"] = "z" * 10_000
    try:
        code = main(["bench", "serve", "--url", hostile + "/chunks/v1", "--clients", "1"])
    finally:
        MODEL_ID["value"] = "m"
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "did not list a usable model id" in err


def test_a_models_answer_nested_past_the_parser_depth_is_one_line(hostile, capsys):
    """Found by the issue-10 QA run: json.loads raised RecursionError, which the command did not catch (a traceback)."""
    code = main(["bench", "serve", "--url", hostile + "/nested/v1", "--clients", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "did not list a usable model id" in err
