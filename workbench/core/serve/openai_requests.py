"""Request bodies of the OpenAI API, checked field by field: a SequenceRequest, or ApiError (4xx, one line)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from workbench.core.config.limits import TEMPERATURE_MAX, TEMPERATURE_MIN
from workbench.core.engine.events import ChatMessage, Sampling
from workbench.core.engine.sequence_events import SequenceRequest

MAX_BODY_BYTES = 1_000_000  # a request body beyond this is refused before it is parsed
MAX_MESSAGES = 1_000
MAX_STOPS = 4  # OpenAI's limit
MAX_STOP_CHARS = 200
ROLES = ("system", "user", "assistant", "developer")
# Accepted and ignored: they change nothing here, and clients send them by default.
_IGNORED = {"model", "user", "stream_options", "metadata", "store", "service_tier", "parallel_tool_calls"}
# Refused with a clear message rather than silently ignored: the answer would not be what was asked.
_UNSUPPORTED = {
    "tools": "tool calls are not supported by this server",
    "functions": "function calls are not supported by this server",
    "tool_choice": "tool calls are not supported by this server",
    "response_format": "response_format (JSON mode) is not supported by this server",
    "logprobs": "logprobs are not supported by this server",
    "top_logprobs": "logprobs are not supported by this server",
    "suffix": "suffix (fill in the middle) is not supported by this server",
    "echo": "echo is not supported by this server",
    "best_of": "best_of is not supported by this server",
    "logit_bias": "logit_bias is not supported by this server (the engine's sampler takes no per-token bias)",
}


class ApiError(Exception):
    """An HTTP error in OpenAI's error shape: status, one-line message, the offending parameter."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error", headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.kind = kind
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class ApiRequest:
    request: SequenceRequest
    stream: bool
    include_usage: bool  # stream_options.include_usage: a last chunk with the token counts


def parse_json_body(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_BODY_BYTES:
        raise ApiError(413, f"the request body has {len(raw)} bytes; the limit is {MAX_BODY_BYTES}", code="body_too_large")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise ApiError(400, f"the request body is not valid JSON: {error}", code="invalid_json") from None
    except RecursionError:  # '[' * 100_000 fits the size limit; the JSON decoder recurses once per level
        raise ApiError(400, "the request body is nested too deeply to be a request", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    return body


def chat_request(body: dict[str, Any]) -> ApiRequest:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty list of {role, content} objects", param="messages")
    if len(messages) > MAX_MESSAGES:
        raise ApiError(400, f"'messages' has {len(messages)} entries; the limit is {MAX_MESSAGES}", param="messages")
    parsed = tuple(_message(message, index) for index, message in enumerate(messages))
    known = {"messages", "max_tokens", "max_completion_tokens"}
    return _with_sampling(body, known, messages=parsed)


def completion_request(body: dict[str, Any]) -> ApiRequest:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]  # a batch of one: the only batch this server takes
    if not isinstance(prompt, str):
        raise ApiError(400, "'prompt' must be a string (a list of prompts or of token ids is not supported)", param="prompt")
    if not prompt:
        raise ApiError(400, "'prompt' is empty", param="prompt")
    return _with_sampling(body, {"prompt", "max_tokens"}, prompt=prompt)


def _message(message: Any, index: int) -> ChatMessage:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise ApiError(400, f"{where} must be an object with 'role' and 'content'", param=where)
    role = message.get("role")
    if role not in ROLES:
        raise ApiError(400, f"{where}.role must be one of {', '.join(ROLES)}", param=f"{where}.role")
    content = message.get("content")
    if isinstance(content, list):  # content parts: text only
        texts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise ApiError(400, f"{where}.content parts must be text parts ({{type: text, text: ...}})", param=f"{where}.content")
            texts.append(part["text"])
        content = "".join(texts)
    if not isinstance(content, str):
        raise ApiError(400, f"{where}.content must be a string", param=f"{where}.content")
    return ChatMessage("system" if role == "developer" else role, content)


def _with_sampling(body: dict[str, Any], known: set[str], **what: Any) -> ApiRequest:
    for name, why in _UNSUPPORTED.items():
        value = body.get(name)
        # An empty logit_bias ({}) biases nothing, so it is the same request without one.
        if value not in (None, False, 0, [], {}, "none", "auto") and not (name == "response_format" and value == {"type": "text"}):
            raise ApiError(400, why, param=name, code="unsupported_parameter")
    _number(body, "n", int, 1, 1, 1, "this server answers one choice per request (n = 1)")
    defaults = Sampling()
    temperature = _number(body, "temperature", float, 1.0, TEMPERATURE_MIN, TEMPERATURE_MAX)
    top_p = _number(body, "top_p", float, 1.0, 0.0, 1.0, exclusive_low=True)
    top_k = _number(body, "top_k", int, defaults.top_k, 0, 1_000_000)
    min_p = _number(body, "min_p", float, defaults.min_p, 0.0, 1.0)
    repeat_penalty = _number(body, "repeat_penalty", float, 1.0, 0.0, 10.0, exclusive_low=True)
    frequency_penalty = _number(body, "frequency_penalty", float, 0.0, -2.0, 2.0)
    presence_penalty = _number(body, "presence_penalty", float, 0.0, -2.0, 2.0)
    seed = _number(body, "seed", int, -1, -(2**63), 2**63 - 1)
    seed = seed % 2**32 if seed >= 0 else -1
    max_tokens = None
    for name in ("max_completion_tokens", "max_tokens"):
        if name in known and body.get(name) is not None:
            max_tokens = _number(body, name, int, 1, 1, 10_000_000)
            break
    stop = _stops(body.get("stop"))
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise ApiError(400, "'stream' must be true or false", param="stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object", param="stream_options")
    include_usage = bool(options and options.get("include_usage") is True)
    sampling = Sampling(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, repeat_penalty=repeat_penalty,
                        seed=seed, max_tokens=max_tokens or 1)
    request = SequenceRequest(sampling=sampling, max_tokens=max_tokens, stop=stop, frequency_penalty=frequency_penalty,
                              presence_penalty=presence_penalty, **what)
    return ApiRequest(request, stream, include_usage)


def _number(body: dict[str, Any], name: str, kind: type, default: Any, low: float, high: float,
            why: str = "", *, exclusive_low: bool = False) -> Any:
    value = body.get(name)
    if value is None:
        return default
    # bool is an int in Python, never a number in JSON; a float where an int is needed is refused.
    ok_type = not isinstance(value, bool) and (isinstance(value, int) or (kind is float and isinstance(value, float)))
    if not ok_type:
        raise ApiError(400, f"'{name}' must be {'an integer' if kind is int else 'a number'}", param=name)
    low_ok = value > low if exclusive_low else value >= low
    # An int is compared as it is: math.isfinite(10**400) raises OverflowError (JSON ints have no size limit).
    finite = isinstance(value, int) or math.isfinite(value)
    if not (finite and low_ok and value <= high):
        bound = f"more than {low:g}" if exclusive_low else f"at least {low:g}"
        raise ApiError(400, why or f"'{name}' {value} must be {bound} and at most {high:g}", param=name)
    return kind(value)


def _stops(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(stop, str) for stop in stops):
        raise ApiError(400, "'stop' must be a string or a list of strings", param="stop")
    if len(stops) > MAX_STOPS or any(len(stop) > MAX_STOP_CHARS for stop in stops):
        raise ApiError(400, f"'stop' takes at most {MAX_STOPS} strings of at most {MAX_STOP_CHARS} characters", param="stop")
    return tuple(stop for stop in stops if stop)
