"""Hub search and the curated list, through huggingface_hub against the test hub, plus `workbench search`."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from hubserver import closed_port_url, hub  # noqa: F401 - hub is a fixture
from workbench.cli.main import main
from workbench.core.errors import HubError
from workbench.core.hub.files import quant_from_name
from workbench.core.hub.search import curated_models, search_gguf_repos
from workbench.core.paths import bundled_model_path


@pytest.fixture
def populated_hub(hub):
    model = bundled_model_path()
    hub.add_repo("bartowski/SmolLM2-135M-Instruct-GGUF", {"SmolLM2-135M-Instruct-Q4_1.gguf": model}, downloads=5_000, likes=12)
    hub.add_repo("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", {"smollm2-135m-instruct-q4_1.gguf": model}, downloads=90_000, likes=40)
    hub.add_repo("someone/SmolLM2-135M-Instruct-GGUF", {"smol-q4_1.gguf": model}, downloads=3, gated=True)
    hub.add_repo("HuggingFaceTB/SmolLM2-135M-Instruct", {"model.gguf": model}, downloads=1_000_000, tags=("transformers",))
    hub.add_repo("Qwen/Qwen2.5-0.5B-Instruct-GGUF", {"qwen2.5-0.5b-instruct-q4_1.gguf": model}, downloads=70_000)
    return hub


def test_search_returns_gguf_repos_most_downloaded_first(populated_hub):
    hits = search_gguf_repos("smollm2")
    assert [h.repo for h in hits] == [
        "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF",
        "bartowski/SmolLM2-135M-Instruct-GGUF",
        "someone/SmolLM2-135M-Instruct-GGUF",
    ]  # the non-GGUF repository is filtered out by the hub, as `filter=gguf` asks
    assert hits[0].downloads == 90_000 and hits[0].likes == 40 and hits[0].last_modified == "2024-10-01"
    assert [h.gated for h in hits] == [False, False, True]
    (request,) = [r for r in populated_hub.requests if r.path == "/api/models"]
    assert request.status == 200


def test_search_limit_is_passed_to_the_hub(populated_hub):
    assert [h.repo for h in search_gguf_repos("smollm2", limit=1)] == ["HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"]
    with pytest.raises(HubError, match="--limit must be at least 1"):
        search_gguf_repos("smollm2", limit=0)


def test_search_against_a_down_hub_is_one_clear_line(hub, monkeypatch):
    endpoint = closed_port_url()
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    with pytest.raises(HubError) as caught:
        search_gguf_repos("qwen")
    text = str(caught.value)
    assert text.startswith(f"Hugging Face hub unreachable at {endpoint}: ")
    assert text.endswith("Use cached, local or bundled models (`workbench models`)")
    assert "\n" not in text


def test_a_hub_that_accepts_but_never_answers_is_given_up_on(hub, monkeypatch):
    # A listening socket that never replies: without timeouts the search would hang forever.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "1")
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.setdefault("error", _error_of(search_gguf_repos, "qwen")), daemon=True)
    worker.start()
    worker.join(60)  # liveness bound for a broken build; the read timeout is 1 s
    silent.close()
    assert isinstance(outcome.get("error"), HubError)
    assert "unreachable" in str(outcome["error"]) and "timed out" in str(outcome["error"]).lower()


def test_offline_mode_is_honoured_without_a_request(hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError, match="offline mode is on"):
        search_gguf_repos("qwen")
    assert hub.requests == []


def test_curated_list_names_real_gguf_repos_and_files():
    models = curated_models()
    names = [m.name for m in models]
    assert len(models) >= 10 and len(set(names)) == len(names)
    for expected in ("SmolLM2 135M", "SmolLM2 360M", "SmolLM2 1.7B", "Qwen2.5 0.5B", "Qwen2.5 1.5B", "Qwen2.5 3B",
                     "Llama 3.2 1B", "Llama 3.2 3B", "Phi-3.5 mini", "Gemma 2 2B"):
        assert any(name.startswith(expected) for name in names), expected
    for model in models:
        owner, _, repo_name = model.repo.partition("/")
        assert owner and repo_name.lower().endswith("-gguf"), model.repo
        assert model.suggested_file.endswith(".gguf") and quant_from_name(model.suggested_file) in ("Q4_K_M", "Q8_0")
    assert next(m for m in models if m.name.startswith("Gemma")).gated


def test_cli_search_table_json_and_curated(populated_hub, capsys):
    assert main(["search", "smollm2", "--limit", "2"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["REPOSITORY", "DOWNLOADS", "LIKES", "GATED", "UPDATED"]
    assert table[1].split()[:2] == ["HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", "90,000"]
    assert len(table) == 3

    assert main(["search", "qwen", "--json"]) == 0
    (hit,) = json.loads(capsys.readouterr().out)
    assert hit["repo"] == "Qwen/Qwen2.5-0.5B-Instruct-GGUF" and hit["downloads"] == 70_000

    assert main(["search", "--curated", "--json"]) == 0
    assert [m["repo"] for m in json.loads(capsys.readouterr().out)] == [m.repo for m in curated_models()]

    assert main(["search"]) == 2
    assert capsys.readouterr().err.strip() == (
        "workbench: search needs TEXT. Give words of the model name, e.g. `workbench search qwen2.5`, or use --curated")


def _error_of(function, *args):
    try:
        function(*args)
    except Exception as error:  # noqa: BLE001 - returned for the assertion
        return error
    return None


def test_a_failing_hub_api_is_reported_at_once(populated_hub):
    populated_hub.api_status = 503
    with pytest.raises(HubError) as caught:
        search_gguf_repos("smollm2")
    assert str(caught.value) == (f"the hub at {populated_hub.url} failed (HTTP 503). Try again later. "
                                 "Use cached, local or bundled models (`workbench models`)")
    assert len([r for r in populated_hub.requests if r.path == "/api/models"]) == 1  # no silent retries


def test_a_search_makes_no_hidden_agent_registry_request(populated_hub, monkeypatch, tmp_path):
    # huggingface_hub fetches an "agent harness" registry before its first request unless
    # telemetry is off; offline that is one more request (and 3 s on a silent hub).
    from huggingface_hub import constants
    from huggingface_hub.utils import _detect_agent

    fetches = []
    monkeypatch.setattr(_detect_agent, "_fetch_registry", lambda: fetches.append("agent registry"))
    monkeypatch.setattr(_detect_agent, "_registry", None)
    monkeypatch.setattr(constants, "AGENT_HARNESSES_PATH", str(tmp_path / "no-registry.json"))
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", False)
    assert search_gguf_repos("smollm")
    assert fetches == []


def test_unquoted_words_are_one_search_and_filter_the_curated_list(populated_hub, capsys, monkeypatch):
    from workbench.core.hub import search

    asked = []
    monkeypatch.setattr(search, "search_gguf_repos", lambda text, limit: asked.append(text) or ())
    assert main(["search", "qwen2.5", "0.5b"]) == 0  # was: "unrecognized arguments: 0.5b"
    assert asked == ["qwen2.5 0.5b"]
    assert capsys.readouterr().out == "No GGUF repositories match 'qwen2.5 0.5b'.\n"

    assert main(["search", "--curated", "qwen", "3b", "--json"]) == 0
    assert [m["name"] for m in json.loads(capsys.readouterr().out)] == [
        m.name for m in curated_models() if "qwen" in m.name.lower() and "3b" in m.name.lower()]


def test_curated_list_fits_an_80_column_terminal(capsys, monkeypatch):
    monkeypatch.setattr("workbench.cli.text_table.terminal_width", lambda: 80)
    assert main(["search", "--curated"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].split() == ["MODEL", "PARAMS", "REPOSITORY", "GATED"]
    first = curated_models()[0]
    row = lines.index(next(line for line in lines if line.startswith(first.name)))
    assert lines[row + 1] == f"    start with {first.suggested_file}" and first.note.split()[0] in lines[row + 2]
