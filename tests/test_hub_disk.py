"""Downloads on a small real disk: refused before a byte when the model cannot fit, one clear line when the disk fills mid-file.

The disk is a real tmpfs mounted for the test, not a patched os.write: the kernel's own
ENOSPC, its short writes near the end, and statvfs's free count are what the download
meets on a full SD card. Mounting needs root (CAP_SYS_ADMIN), as CI containers and this
build machine have; where the mount is refused the tests skip and say why.
"""

from __future__ import annotations

import errno
import subprocess
import threading
from pathlib import Path

import pytest

from gguf_factory import write_tiny_gguf
from hubserver import Fault, hub  # noqa: F401 - hub is a fixture
from workbench.core.errors import HubError
from workbench.core.hub.cache import cached_models, partial_downloads
from workbench.core.hub.download import DISK_MARGIN_BYTES, download_model
from workbench.core.hub.download_events import DiskFull

REPO = "test-org/Tiny-Llama-GGUF"
FILE = "tiny-llama-Q4_K_M.gguf"


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory):
    return write_tiny_gguf(tmp_path_factory.mktemp("models") / FILE)


def _mount_tmpfs(folder: Path, size_bytes: int):
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"a small real disk needs `mount -t tmpfs` (root): {done.stderr.strip() or done.returncode}")
    return folder


@pytest.fixture
def small_disk(tmp_path, monkeypatch, request):
    """A tmpfs of `request.param` bytes holding the HF cache."""
    disk = _mount_tmpfs(tmp_path / "disk", request.param)
    monkeypatch.setenv("HF_HUB_CACHE", str(disk / "hub"))
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.parametrize("small_disk", [1024 * 1024], indirect=True)
def test_a_download_that_does_not_fit_the_disk_never_starts(hub, tiny_file, small_disk, capsys):
    # 1 MiB free; the model (831 kB) plus the 64 MiB margin left for the filesystem does not fit.
    hub.add_repo(REPO, {FILE: tiny_file})
    with pytest.raises(HubError) as caught:
        download_model(REPO, FILE)
    message = str(caught.value)
    assert "not enough disk space" in message and "HF_HUB_CACHE" in message and str(small_disk / "hub") in message
    # The margin is named: "needs 0.8 MB more, only 1.0 MB free" read as a wrong refusal.
    assert "needs 0.8 MB more and 67.1 MB left free after it, only 1.0 MB free" in message
    assert hub.file_requests() == []  # refused before a byte of the model was asked for

    from workbench.cli.main import main

    assert main(["download", REPO, FILE]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("workbench: ") and "not enough disk space" in err and "Traceback" not in err


# Room for the model and the margin at the start, so the download begins; the test then fills it.
@pytest.mark.parametrize("small_disk", [DISK_MARGIN_BYTES + 4 * 1024 * 1024], indirect=True)
def test_a_disk_that_fills_during_the_download_is_one_line_and_the_partial_resumes(hub, tiny_file, small_disk, tmp_path):
    hub.add_repo(REPO, {FILE: tiny_file})
    release = threading.Event()
    hub.set_fault(REPO, FILE, Fault(stall_after=300_000, stall_seconds=120, release=release))
    outcome: dict = {}

    def download() -> None:
        try:
            outcome["result"] = download_model(REPO, FILE)
        except BaseException as error:  # noqa: BLE001 - inspected below
            outcome["error"] = error

    worker = threading.Thread(target=download)
    worker.start()
    try:
        assert hub.events["stalled"].wait(60), "the server never reached the stall"
        filler = small_disk / "filler"  # another program takes the rest of the disk meanwhile
        with open(filler, "wb", buffering=0) as out:
            try:
                while True:
                    out.write(b"\0" * (256 * 1024))
            except OSError as error:
                assert error.errno == errno.ENOSPC
    finally:
        release.set()
        worker.join(120)
    error = outcome.get("error")
    assert isinstance(error, DiskFull), outcome
    (partial,) = partial_downloads(small_disk / "hub")
    text = str(error)
    assert text.startswith(f"disk full at {partial.path} after ") and "partial file is kept" in text and "\n" not in text
    assert partial.size_bytes >= 300_000  # every byte that reached the disk is still there
    assert cached_models(small_disk / "hub") == ()

    filler.unlink()  # space freed: the same command resumes from the partial
    hub.requests.clear()
    result = download_model(REPO, FILE)
    (get,) = hub.file_requests()
    assert get.range == f"bytes={partial.size_bytes}-"
    assert result.path.read_bytes() == tiny_file.read_bytes()  # the sha256 over the resumed file matched
