"""One set of limits for context and temperature: the preset file, ledger --ctx, the app's settings form, the
engine client's check and the OpenAI-compatible API refuse the same values."""

from __future__ import annotations

import dataclasses

import pytest

from workbench.core.config.limits import CTX_MAX, TEMPERATURE_MAX
from workbench.core.engine.events import Sampling
from workbench.core.engine.sampling_checks import sampling_problems
from workbench.core.serve.openai_requests import ApiError, chat_request
from workbench.ui.screens.settings_modal import parse_sampling

MESSAGES = [{"role": "user", "content": "hi"}]


def _form(temperature: str) -> dict[str, str]:
    return {"temperature": temperature, "top_p": "0.95", "top_k": "40", "min_p": "0.05", "repeat_penalty": "1.1",
            "seed": "-1", "max_tokens": "64"}


@pytest.mark.parametrize("temperature", [2.0, 0.0])
def test_a_temperature_inside_the_range_passes_everywhere(temperature):
    assert parse_sampling(_form(str(temperature)))[1] == []
    assert sampling_problems(dataclasses.replace(Sampling(), temperature=temperature)) == ()
    assert chat_request({"messages": MESSAGES, "temperature": temperature}).request.sampling.temperature == temperature


@pytest.mark.parametrize("temperature", [2.5, 5.0, -0.1])
def test_a_temperature_outside_the_range_is_refused_everywhere(temperature):
    # before: the app's form took 0-5, the API 0-2 and the CLI any positive value
    assert parse_sampling(_form(str(temperature)))[0] is None
    assert sampling_problems(dataclasses.replace(Sampling(), temperature=temperature))
    with pytest.raises(ApiError):
        chat_request({"messages": MESSAGES, "temperature": temperature})


def test_the_limits_are_the_documented_figures():
    assert (CTX_MAX, TEMPERATURE_MAX) == (16_777_216, 2.0)
