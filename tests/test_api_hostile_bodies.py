"""Hostile request bodies for `workbench api` inside the size limit: deep nesting and huge integers are a 400, never a crash."""

from __future__ import annotations

import pytest

from workbench.core.serve.openai_requests import MAX_BODY_BYTES, ApiError, chat_request, completion_request, parse_json_body

HI = b'{"messages": [{"role": "user", "content": "hi"}]'


def test_a_body_nested_deeper_than_the_decoder_recurses_is_a_400():
    # 200,000 bytes is a fifth of the size limit; Python's JSON decoder recurses once per '['
    # and raised RecursionError, which Starlette turns into a 500 with a traceback in the log.
    raw = b"[" * 200_000
    assert len(raw) < MAX_BODY_BYTES
    with pytest.raises(ApiError) as caught:
        parse_json_body(raw)
    assert caught.value.status == 400 and "nested" in caught.value.message and "\n" not in caught.value.message


@pytest.mark.parametrize("field", ["top_k", "seed", "max_tokens", "n", "temperature"])
def test_an_integer_too_large_for_a_float_is_a_400_naming_the_field(field):
    # JSON integers have no size limit: 400 digits parse fine, and math.isfinite() raised
    # OverflowError on them (a 500) instead of the range check answering.
    raw = HI + b', "%s": %s}' % (field.encode(), b"9" * 400)
    with pytest.raises(ApiError) as caught:
        chat_request(parse_json_body(raw))
    assert caught.value.status == 400 and caught.value.param == field


def test_a_negative_huge_seed_in_a_completion_is_a_400():
    raw = b'{"prompt": "hi", "seed": -%s}' % (b"9" * 400)
    with pytest.raises(ApiError) as caught:
        completion_request(parse_json_body(raw))
    assert caught.value.status == 400 and caught.value.param == "seed"


def test_logit_bias_is_refused_with_a_400_not_silently_ignored():
    # It was accepted and dropped: the answer was not biased the way the client asked.
    raw = HI + b', "logit_bias": {"50256": -100}}'
    with pytest.raises(ApiError) as caught:
        chat_request(parse_json_body(raw))
    assert caught.value.status == 400 and caught.value.param == "logit_bias" and "logit_bias" in caught.value.message
    with pytest.raises(ApiError):
        completion_request(parse_json_body(b'{"prompt": "hi", "logit_bias": {"1": 5}}'))
    # an empty bias biases nothing: the same request as without one
    assert chat_request(parse_json_body(HI + b', "logit_bias": {}}')).request.messages[0].content == "hi"
