"""A hostile mirror (HF_ENDPOINT) against download and preview: path names, planted links, bodies longer than announced."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from gguf_factory import write_tiny_gguf
from hubserver import Fault, Hostile, hub, hub_cache, sha256_of, tree_outside_caches  # noqa: F401 - hub is a fixture
from workbench.core.errors import WorkbenchError
from workbench.core.hub import download_events as ev
from workbench.core.hub.cache import cached_models, partial_downloads
from workbench.core.hub.download import download_model
from workbench.core.hub.preview import read_remote_header

REPO = "evil/Mirror-GGUF"
FILE = "tiny-llama-Q4_K_M.gguf"
STORAGE = "models--evil--Mirror-GGUF"


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory):
    return write_tiny_gguf(tmp_path_factory.mktemp("models") / FILE)


@pytest.fixture
def victim(tmp_path):
    """A folder next to the caches holding a file the mirror would like to overwrite."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "file").write_text("precious")
    (folder / FILE).write_text("precious too")
    return folder


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("workbench: ") and "Traceback" not in captured.err
    return lines[-1]


def mirror(hub, tiny_file, **hostile) -> None:
    hub.add_repo(REPO, {FILE: tiny_file})
    hub.repos[REPO].hostile = Hostile(serve=FILE, **hostile)


def sibling(name, tiny_file, *, size=None, sha256=None) -> dict:
    real_size, real_sha = tiny_file.stat().st_size, sha256_of(tiny_file)
    return {"rfilename": name, "size": real_size if size is None else size,
            "lfs": {"sha256": real_sha if sha256 is None else sha256, "size": real_size if size is None else size, "pointerSize": 135}}


# -- names that would become paths ---------------------------------------------------------------------

def test_an_etag_climbing_out_of_the_cache_is_refused_and_nothing_outside_changes(hub, tiny_file, victim, tmp_path, capsys):
    # blobs/ is tmp/hf/hub/models--evil--Mirror-GGUF/blobs: four levels up is tmp, where victim/ lives.
    mirror(hub, tiny_file, resolve_headers={"X-Linked-Etag": '"../../../../victim/file"'})
    before = tree_outside_caches(tmp_path)
    with pytest.raises(WorkbenchError) as caught:
        download_model(REPO, FILE)
    message = str(caught.value)
    assert f"the hub at {hub.url}" in message and "'../../../../victim/file'" in message and "ETag" in message
    assert tree_outside_caches(tmp_path) == before
    assert (victim / "file").read_text() == "precious"
    assert not (hub_cache(tmp_path) / STORAGE / "blobs").exists() or list((hub_cache(tmp_path) / STORAGE / "blobs").iterdir()) == []

    from workbench.cli.main import main

    assert main(["download", REPO, FILE]) == 2
    line = one_error_line(capsys)
    assert hub.url in line and "../../../../victim/file" in line


@pytest.mark.parametrize("name", ["ABSOLUTE", "../../../../../victim/tiny-llama-Q4_K_M.gguf", "sub/../../../../../../victim/x.gguf"])
def test_a_listing_name_that_is_absolute_or_climbs_is_refused(hub, tiny_file, victim, tmp_path, capsys, name):
    # snapshots/<commit>/ is five levels below tmp: "../" x5 lands in tmp/victim.
    name = str(victim / FILE) if name == "ABSOLUTE" else name
    mirror(hub, tiny_file, siblings=[sibling(name, tiny_file)])
    before = tree_outside_caches(tmp_path)
    with pytest.raises(WorkbenchError) as caught:
        download_model(REPO, name)
    assert f"the hub at {hub.url}" in str(caught.value) and "file name" in str(caught.value)
    assert tree_outside_caches(tmp_path) == before and (victim / FILE).read_text() == "precious too"

    from workbench.cli.main import main

    for argv in (["files", REPO], ["files", REPO, "--preview"], ["download", REPO, name]):
        assert main(argv) == 2
        assert hub.url in one_error_line(capsys)
    assert tree_outside_caches(tmp_path) == before


def test_a_commit_climbing_out_of_snapshots_is_refused(hub, tiny_file, victim, tmp_path):
    # snapshots/ is four levels below tmp: snapshots/../../../../victim is tmp/victim.
    mirror(hub, tiny_file, info={"sha": "../../../../victim"})
    before = tree_outside_caches(tmp_path)
    with pytest.raises(WorkbenchError) as caught:
        download_model(REPO, FILE)
    assert "commit" in str(caught.value) and "'../../../../victim'" in str(caught.value) and hub.url in str(caught.value)
    assert tree_outside_caches(tmp_path) == before and (victim / FILE).read_text() == "precious too"


@pytest.mark.parametrize("header, value", [("X-Repo-Commit", "../../x"), ("X-Linked-Size", "-5"), ("X-Linked-Etag", '"' + "AB" * 32 + '"'),
                                           ("Location", "file:///etc/passwd")])
def test_resolve_headers_in_no_hub_form_are_refused_for_download_and_preview(hub, tiny_file, tmp_path, header, value):
    mirror(hub, tiny_file, resolve_headers={header: value})
    before = tree_outside_caches(tmp_path)
    for action in (lambda: download_model(REPO, FILE), lambda: read_remote_header(REPO, FILE)):
        with pytest.raises(WorkbenchError) as caught:
            action()
        assert hub.url in str(caught.value) and "\n" not in str(caught.value)
    assert tree_outside_caches(tmp_path) == before and hub.file_requests() == []


def test_an_etag_that_contradicts_the_listed_sha256_is_refused(hub, tiny_file, tmp_path):
    other = "0" * 64
    mirror(hub, tiny_file, resolve_headers={"X-Linked-Etag": f'"{other}"'})
    with pytest.raises(WorkbenchError) as caught:
        download_model(REPO, FILE)
    assert "differs from the sha256" in str(caught.value) and hub.file_requests() == []


# -- links planted inside the cache ---------------------------------------------------------------------

def _plant(tmp_path: Path, tiny_file: Path, hub, where: str, victim: Path) -> None:
    storage = hub_cache(tmp_path) / STORAGE
    sha = sha256_of(tiny_file)
    commit = hub.repos[REPO].commit
    if where == "snapshot folder":
        (storage / "snapshots").mkdir(parents=True)
        os.symlink(victim, storage / "snapshots" / commit)  # the pointer would replace victim/<FILE>
    elif where == "partial file":
        (storage / "blobs").mkdir(parents=True)
        os.symlink(victim / "file", storage / "blobs" / f"{sha}.incomplete")  # appends would go to victim/file
    elif where == "blobs folder":
        storage.mkdir(parents=True)
        os.symlink(victim, storage / "blobs")
    elif where == "complete blob":
        (storage / "blobs").mkdir(parents=True)
        (victim / "same-size").write_bytes(b"x" * tiny_file.stat().st_size)
        os.symlink(victim / "same-size", storage / "blobs" / sha)  # would be taken as the cached model


@pytest.mark.parametrize("where", ["snapshot folder", "partial file", "blobs folder", "complete blob"])
def test_a_link_planted_in_the_cache_cannot_lead_a_write_out_of_it(hub, tiny_file, victim, tmp_path, where):
    hub.add_repo(REPO, {FILE: tiny_file})
    _plant(tmp_path, tiny_file, hub, where, victim)
    before = tree_outside_caches(tmp_path)
    with pytest.raises(WorkbenchError) as caught:
        download_model(REPO, FILE)
    assert "leads outside the folder" in str(caught.value) and hub.url in str(caught.value)
    assert tree_outside_caches(tmp_path) == before
    assert cached_models(hub_cache(tmp_path)) == ()


def test_a_link_planted_in_the_header_cache_cannot_lead_the_preview_out(hub, tiny_file, victim, tmp_path):
    hub.add_repo(REPO, {FILE: tiny_file})
    headers = tmp_path / "wb-cache" / "headers"
    headers.mkdir(parents=True)
    os.symlink(victim, headers / STORAGE)
    before = tree_outside_caches(tmp_path)
    with pytest.raises(WorkbenchError) as caught:
        read_remote_header(REPO, FILE)
    assert "leads outside the folder" in str(caught.value)
    assert tree_outside_caches(tmp_path) == before


# -- bodies longer than announced ------------------------------------------------------------------------

def test_a_body_longer_than_announced_stops_at_the_size_and_is_a_server_error(hub, tiny_file, tmp_path):
    size = tiny_file.stat().st_size
    hub.add_repo(REPO, {FILE: tiny_file})
    hub.set_fault(REPO, FILE, Fault(oversend=2 * size))  # Content-Length says 3x the file: "300%"
    events = []
    with pytest.raises(WorkbenchError) as caught:
        download_model(REPO, FILE, on_event=events.append)
    assert f"sent more than the {size:,} bytes announced" in str(caught.value)
    (partial,) = partial_downloads(hub_cache(tmp_path))
    assert partial.size_bytes == size  # not one byte past the size
    progress = [e for e in events if isinstance(e, ev.DownloadProgressed)]
    assert progress and all(e.done_bytes <= e.total_bytes for e in progress)
    assert all(e.eta_s is None or e.eta_s >= 0 for e in progress)
    assert cached_models(hub_cache(tmp_path)) == ()  # nothing offered as a model after a server error

    # The kept bytes are the announced file: the next run checks them and fetches nothing.
    result = download_model(REPO, FILE)
    assert result.fetched_bytes == 0 and result.path.read_bytes() == tiny_file.read_bytes()


def test_an_endless_body_is_cut_at_the_size_fast_and_the_server_sees_the_hang_up(hub, tiny_file, tmp_path):
    size = tiny_file.stat().st_size
    hub.add_repo(REPO, {FILE: tiny_file})
    hub.set_fault(REPO, FILE, Fault(endless=True))
    with pytest.raises(WorkbenchError) as caught:
        download_model(REPO, FILE)
    assert "sent more than" in str(caught.value)
    assert hub.events["hung_up"].wait(60)  # the client closed the endless transfer (liveness bound, not a speed check)
    (partial,) = partial_downloads(hub_cache(tmp_path))
    assert partial.size_bytes == size


def test_cli_progress_never_passes_100_percent_on_an_oversized_body(hub, tiny_file, capsys):
    from workbench.cli.main import main

    hub.add_repo(REPO, {FILE: tiny_file})
    hub.set_fault(REPO, FILE, Fault(oversend=2 * tiny_file.stat().st_size))
    assert main(["download", REPO, FILE]) == 2
    captured = capsys.readouterr()
    shares = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)%", captured.err)]
    assert shares and max(shares) <= 100.0
    assert "ETA -" not in captured.err and "Traceback" not in captured.err
    assert "sent more than" in captured.err.strip().splitlines()[-1]


def test_a_file_of_zero_bytes_is_stored_not_a_missing_partial(hub, tmp_path):
    # Found by the fuzz test: with nothing to fetch, no partial file was ever created and the
    # check after the transfer raised FileNotFoundError.
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    hub.add_repo(REPO, {"empty.gguf": empty})
    result = download_model(REPO, "empty.gguf")
    assert result.size_bytes == 0 and result.path.read_bytes() == b""
    # The sha256 of nothing, as `sha256sum /dev/null` prints it.
    assert result.path.resolve().name == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


# -- answers that would size memory ----------------------------------------------------------------------

def test_an_endless_file_listing_is_refused_at_a_bound_without_filling_memory(hub, tiny_file):
    import tracemalloc

    from workbench.core.hub.client import MAX_ANSWER_BYTES
    from workbench.core.hub.files import list_gguf_files

    mirror(hub, tiny_file, endless_listing=True)
    tracemalloc.start()
    try:
        with pytest.raises(WorkbenchError) as caught:
            list_gguf_files(REPO)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"the hub at {hub.url} sent more than 8 MB" in str(caught.value)
    assert peak < 3 * MAX_ANSWER_BYTES  # the body buffer and its copies, not the endless answer
    assert hub.events["hung_up"].wait(60)


def test_a_search_hit_whose_id_is_no_repository_id_is_refused(hub, tiny_file):
    from workbench.core.hub.search import search_gguf_repos

    hub.add_repo("evil/../../victim", {FILE: tiny_file})
    with pytest.raises(WorkbenchError) as caught:
        search_gguf_repos("victim")
    assert hub.url in str(caught.value) and "'evil/../../victim'" in str(caught.value)
