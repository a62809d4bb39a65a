"""Downloads from a real HTTP hub look-alike: HF cache layout, resume, faults, verification, disk check."""

from __future__ import annotations

import functools
import os
import threading

import gguf
import huggingface_hub
import pytest

from gguf_factory import TinyModel, write_tiny_gguf
from hubserver import Fault, closed_port_url, hub, hub_cache, sha256_of  # noqa: F401 - hub is a fixture
from workbench.core.errors import HubError
from workbench.core.hub import download_events as ev
from workbench.core.hub.cache import cached_models, partial_downloads
from workbench.core.hub.download import download_model, plan_download

REPO = "test-org/Tiny-Llama-GGUF"
FILE = "tiny-llama-Q4_K_M.gguf"


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory):
    return write_tiny_gguf(tmp_path_factory.mktemp("models") / FILE)


@pytest.fixture
def tiny_repo(hub, tiny_file):
    return hub.add_repo(REPO, {FILE: tiny_file}, downloads=10)


def _no_model_usable(tmp_path) -> bool:
    return cached_models(hub_cache(tmp_path)) == ()


def test_download_lands_in_the_hf_cache_layout_and_other_tools_see_it(hub, tiny_repo, tiny_file, tmp_path):
    events = []
    result = download_model(REPO, FILE, on_event=events.append)

    sha = sha256_of(tiny_file)
    storage = hub_cache(tmp_path) / "models--test-org--Tiny-Llama-GGUF"
    assert result.path == storage / "snapshots" / tiny_repo.commit / FILE
    assert result.path.is_symlink() and not os.path.isabs(os.readlink(result.path))
    assert result.path.resolve() == storage / "blobs" / sha
    assert result.path.read_bytes() == tiny_file.read_bytes()
    assert (storage / "refs" / "main").read_text() == tiny_repo.commit
    assert huggingface_hub.try_to_load_from_cache(REPO, FILE, cache_dir=hub_cache(tmp_path)) == str(result.path)

    kinds = [type(e) for e in events]
    assert kinds[0] is ev.DownloadStarted and kinds[-1] is ev.DownloadFinished
    verified = next(e for e in events if isinstance(e, ev.DownloadVerified))
    assert verified.sha256 == sha and verified.checked_against == "LFS sha256"
    last_progress = [e for e in events if isinstance(e, ev.DownloadProgressed)][-1]
    assert last_progress.done_bytes == last_progress.total_bytes == tiny_file.stat().st_size
    assert result.fetched_bytes == tiny_file.stat().st_size and not result.already_cached

    sent_before = hub.body_bytes_sent()
    again = download_model(REPO, FILE)
    assert again.already_cached and again.fetched_bytes == 0 and again.path == result.path
    assert hub.body_bytes_sent() == sent_before


def test_a_cut_connection_is_resumed_with_a_range_request(hub, tiny_repo, tiny_file):
    hub.set_fault(REPO, FILE, Fault(cut_after=300_000))
    events = []
    result = download_model(REPO, FILE, on_event=events.append)

    assert hub.events["cut"].is_set()
    gets = hub.file_requests()  # no other retry: the read timeout is generous, only the cut interrupts
    assert [g.range for g in gets] == [None, "bytes=300000-"]
    assert [g.body_bytes for g in gets] == [300_000, tiny_file.stat().st_size - 300_000]
    retried = [e for e in events if isinstance(e, ev.DownloadRetried)]
    assert len(retried) == 1 and retried[0].resume_from_bytes == 300_000
    assert result.path.read_bytes() == tiny_file.read_bytes()


def test_a_link_that_keeps_dropping_leaves_a_resumable_partial_never_a_model(hub, tiny_repo, tiny_file, tmp_path):
    hub.set_fault(REPO, FILE, Fault(cut_after=200_000, times=None))
    with pytest.raises(HubError) as caught:
        download_model(REPO, FILE, max_attempts=3)
    message = str(caught.value)
    assert "download stopped at" in message and "resume" in message
    assert _no_model_usable(tmp_path)
    (partial,) = partial_downloads(hub_cache(tmp_path))
    assert partial.repo == REPO and partial.size_bytes == 600_000

    hub.faults.clear()
    hub.requests.clear()
    events = []
    result = download_model(REPO, FILE, on_event=events.append)
    started = next(e for e in events if isinstance(e, ev.DownloadStarted))
    assert started.resumed_from_bytes == 600_000
    (get,) = hub.file_requests()
    assert get.range == "bytes=600000-" and get.body_bytes == tiny_file.stat().st_size - 600_000
    assert result.path.read_bytes() == tiny_file.read_bytes()
    assert partial_downloads(hub_cache(tmp_path)) == ()


def test_a_stalled_link_times_out_and_resumes(hub, tiny_repo, tiny_file, monkeypatch):
    # The 100 kB before the stall are in the socket buffer at once, so only the stall itself
    # can exhaust the read timeout, however slowly this machine schedules the client.
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "3")
    hub.set_fault(REPO, FILE, Fault(stall_after=100_000, stall_seconds=120))
    events = []
    result = download_model(REPO, FILE, on_event=events.append)
    assert hub.events["stalled"].is_set()
    (retried,) = [e for e in events if isinstance(e, ev.DownloadRetried)]
    assert "stalled" in retried.reason and retried.resume_from_bytes == 100_000
    assert result.path.read_bytes() == tiny_file.read_bytes()


def test_corrupt_bytes_fail_the_sha256_and_the_file_is_deleted(hub, tiny_repo, tmp_path):
    hub.set_fault(REPO, FILE, Fault(corrupt_at=500_000))
    with pytest.raises(HubError) as caught:
        download_model(REPO, FILE)
    message = str(caught.value)
    assert "sha256 mismatch" in message and "deleted" in message and FILE in message
    storage = hub_cache(tmp_path) / "models--test-org--Tiny-Llama-GGUF"
    assert list((storage / "blobs").iterdir()) == []
    assert not (storage / "snapshots").exists()
    assert _no_model_usable(tmp_path) and partial_downloads(hub_cache(tmp_path)) == ()


def test_gated_repo_needs_an_accepted_licence_and_a_token(hub, tiny_file, monkeypatch, tmp_path):
    hub.add_repo(REPO, {FILE: tiny_file}, gated=True)
    with pytest.raises(HubError) as no_token:
        download_model(REPO, FILE)
    assert "gated" in str(no_token.value) and "needs a token" in str(no_token.value)
    assert f"{hub.url}/{REPO}" in str(no_token.value) and "HF_TOKEN" in str(no_token.value)

    monkeypatch.setenv("HF_TOKEN", "hf_not_accepted")
    with pytest.raises(HubError) as refused:
        download_model(REPO, FILE)
    assert "refused with your token (HTTP 403)" in str(refused.value)
    assert _no_model_usable(tmp_path)

    hub.tokens_with_access.add("hf_accepted")
    monkeypatch.setenv("HF_TOKEN", "hf_accepted")
    result = download_model(REPO, FILE)
    assert result.path.read_bytes() == tiny_file.read_bytes()
    # The token goes to the hub, never to the CDN host the hub redirects to.
    assert all(r.authorization is None for r in hub.requests if r.path.startswith("/cdn/"))
    assert any(r.authorization == "Bearer hf_accepted" for r in hub.requests if "/resolve/" in r.path)


def test_missing_repository_and_file_are_one_clear_line(hub, tiny_repo):
    with pytest.raises(HubError) as no_repo:
        download_model("test-org/Nope-GGUF", FILE)
    assert "no repository test-org/Nope-GGUF" in str(no_repo.value) and "workbench search" in str(no_repo.value)
    with pytest.raises(HubError) as no_file:
        download_model(REPO, "tiny-llama-Q8_0.gguf")
    assert "no GGUF file tiny-llama-Q8_0.gguf" in str(no_file.value) and FILE in str(no_file.value)


def test_a_failing_hub_is_reported_and_nothing_is_cached(hub, tiny_repo, tmp_path):
    hub.set_fault(REPO, FILE, Fault(status=503, times=None))
    with pytest.raises(HubError) as caught:
        download_model(REPO, FILE)
    assert "failed (HTTP 503)" in str(caught.value)
    assert _no_model_usable(tmp_path) and hub.file_requests() == []


def test_a_down_hub_is_reported_as_unreachable(hub, monkeypatch):
    endpoint = closed_port_url()
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    with pytest.raises(HubError) as caught:
        download_model(REPO, FILE)
    assert f"Hugging Face hub unreachable at {endpoint}" in str(caught.value)
    assert "workbench models" in str(caught.value)


def test_a_plan_counts_what_the_cache_already_holds(hub, tiny_repo, tiny_file):
    # The refusal itself is driven through download_model on a small real disk in test_hub_disk.py.
    plan = plan_download(REPO, FILE)
    assert plan.total_bytes == tiny_file.stat().st_size and plan.needed_bytes == plan.total_bytes
    assert hub.file_requests() == []  # planning transfers no model bytes


def test_cancel_keeps_the_partial_and_the_next_run_fetches_only_the_rest(hub, tiny_repo, tiny_file, tmp_path):
    release = threading.Event()
    hub.set_fault(REPO, FILE, Fault(stall_after=300_000, stall_seconds=120, release=release))  # hold the transfer mid-file
    cancel = threading.Event()

    def cancel_when_partial():
        hub.events["stalled"].wait(60)
        while not any(p.size_bytes >= 300_000 for p in partial_downloads(hub_cache(tmp_path))):
            cancel.wait(0.02)
        cancel.set()
        release.set()  # the next bytes reach a client that has been told to stop: it must not write them

    watcher = threading.Thread(target=cancel_when_partial, daemon=True)
    watcher.start()
    with pytest.raises(ev.DownloadCancelled) as caught:
        download_model(REPO, FILE, cancel=cancel)
    watcher.join()
    assert "run the same download again to resume" in str(caught.value)
    (partial,) = partial_downloads(hub_cache(tmp_path))
    assert partial.size_bytes == 300_000
    assert _no_model_usable(tmp_path)

    hub.requests.clear()
    result = download_model(REPO, FILE)
    (get,) = hub.file_requests()
    assert get.range == f"bytes={partial.size_bytes}-"
    assert get.body_bytes == tiny_file.stat().st_size - partial.size_bytes
    assert result.path.read_bytes() == tiny_file.read_bytes()


def test_a_split_model_downloads_every_part_and_lists_once(hub, tmp_path, monkeypatch):
    folder = tmp_path / "split"
    folder.mkdir()
    with monkeypatch.context() as patch:  # the gguf package's own splitter, as llama.cpp's gguf-split writes
        patch.setattr(gguf, "GGUFWriter", functools.partial(gguf.GGUFWriter, split_max_tensors=12))
        write_tiny_gguf(folder / "tiny-Q4_K_M.gguf", TinyModel())
    parts = sorted(folder.iterdir())
    assert [p.name for p in parts] == ["tiny-Q4_K_M-00001-of-00002.gguf", "tiny-Q4_K_M-00002-of-00002.gguf"]
    hub.add_repo("test-org/Split-GGUF", {p.name: p for p in parts})

    events = []
    result = download_model("test-org/Split-GGUF", parts[1].name, on_event=events.append)
    assert result.path.name == parts[0].name
    assert result.size_bytes == sum(p.stat().st_size for p in parts)
    assert [e.part for e in events if isinstance(e, ev.DownloadStarted)] == [1, 2]
    (entry,) = cached_models(hub_cache(tmp_path))
    assert entry.parts == 2 and entry.path == result.path and entry.quant == "Q4_K_M"
    assert entry.size_bytes == result.size_bytes



def test_a_server_that_ignores_range_on_resume_restarts_the_file_cleanly(hub, tiny_repo, tiny_file):
    hub.set_fault(REPO, FILE, Fault(cut_after=300_000))
    hub.ignore_range = True  # the resume request gets the whole file back (200), not the rest (206)
    result = download_model(REPO, FILE)
    assert [(g.range, g.status) for g in hub.file_requests()] == [(None, 200), ("bytes=300000-", 200)]
    assert result.path.read_bytes() == tiny_file.read_bytes()  # and the sha256 check passed


def test_a_second_download_of_the_same_file_is_refused_while_one_runs(hub, tiny_repo, tiny_file, tmp_path):
    import filelock

    lock = filelock.FileLock(str(hub_cache(tmp_path) / ".locks" / "models--test-org--Tiny-Llama-GGUF" / f"{sha256_of(tiny_file)}.lock"))
    with lock:  # what huggingface_hub or another workbench holds while it downloads this blob
        with pytest.raises(HubError) as caught:
            download_model(REPO, FILE)
    assert f"another download of {FILE} is running" in str(caught.value)
    assert download_model(REPO, FILE).path.read_bytes() == tiny_file.read_bytes()


def test_cli_download_of_a_file_that_is_no_gguf_is_not_offered_as_a_model(hub, tiny_file, tmp_path, capsys):
    # The hub's own file is an error page (its sha256 matches): the download is correct, the
    # model is not, and the path must not be printed as the model to load.
    from workbench.cli.main import main

    page = tmp_path / "page.gguf"
    page.write_text("<!DOCTYPE html><html><body>Rate limit exceeded</body></html>")
    hub.add_repo("test-org/Broken-GGUF", {"broken-Q4_0.gguf": page,
                                          "split-Q4_0-00001-of-00002.gguf": tiny_file,
                                          "split-Q4_0-00002-of-00002.gguf": page})
    for argv in (["broken-Q4_0.gguf"], ["split-Q4_0-00001-of-00002.gguf"]):
        assert main(["download", "test-org/Broken-GGUF", *argv]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        (line,) = [line for line in captured.err.splitlines() if line.startswith("workbench: ")]
        assert "downloaded and sha256-verified, but not a usable GGUF: starts with HTML" in line
        assert line.split(":")[1].endswith(".gguf") and "-00001-of-" not in line
