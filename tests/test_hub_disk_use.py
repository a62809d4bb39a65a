"""Disk use per model and deleting one, against the test hub: huggingface_hub's cache API keeps shared blobs."""

from __future__ import annotations

import json
import os

import pytest
from gguf_factory import write_tiny_gguf
from hubserver import hub, hub_cache  # noqa: F401 - hub is a fixture

from workbench.cli.main import main
from workbench.core.errors import WorkbenchError
from workbench.core.hub.disk_use import delete_cached_model, delete_local_model, disk_use
from workbench.core.hub.download import download_model
from workbench.core.paths import quantized_dir

A, B = "test-org/Alpha-GGUF", "test-org/Beta-GGUF"


@pytest.fixture
def two_repos(hub, tmp_path):
    """Alpha with one file and Beta with two; every file downloaded through the workbench."""
    one = write_tiny_gguf(tmp_path / "alpha-Q4_K_M.gguf", seed=1)
    two = write_tiny_gguf(tmp_path / "beta-Q8_0.gguf", seed=2)
    three = write_tiny_gguf(tmp_path / "beta-Q4_0.gguf", seed=3)
    hub.add_repo(A, {one.name: one})
    hub.add_repo(B, {two.name: two, three.name: three})
    paths = {name: download_model(repo, name).path for repo, name in ((A, one.name), (B, two.name), (B, three.name))}
    return {"alpha": one, "beta": (two, three), "paths": paths}


def _storage(tmp_path, repo):
    return hub_cache(tmp_path) / ("models--" + repo.replace("/", "--"))


def test_disk_use_per_repository_is_the_bytes_of_its_files(two_repos, tmp_path, capsys):
    use = disk_use()
    by_repo = {r.repo: r for r in use.repos}
    assert set(by_repo) == {A, B}
    assert by_repo[A].size_bytes == two_repos["alpha"].stat().st_size
    assert by_repo[B].size_bytes == sum(f.stat().st_size for f in two_repos["beta"])
    assert by_repo[B].gguf_files == ("beta-Q4_0.gguf", "beta-Q8_0.gguf") and by_repo[B].blobs == 2

    made = quantized_dir() / "mine.Q8_0.gguf"
    made.parent.mkdir(parents=True)
    made.write_bytes(b"x" * 1234)
    assert main(["models", "--disk", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {r["repo"]: r["size_bytes"] for r in data["repos"]} == {r.repo: r.size_bytes for r in use.repos}
    assert data["local"] == [{"path": str(made), "size_bytes": 1234, "deletable": True}]
    assert main(["models", "--disk"]) == 0
    out = capsys.readouterr().out
    assert "REPOSITORY" in out and A in out and "in model repositories" in out


def test_deleting_a_repository_frees_its_bytes_and_leaves_the_other(two_repos, tmp_path, capsys):
    alpha_size = two_repos["alpha"].stat().st_size
    assert main(["models", "--delete", A]) == 2  # no --yes: says what would go, deletes nothing
    assert "would delete test-org/Alpha-GGUF" in capsys.readouterr().err
    assert _storage(tmp_path, A).is_dir()

    assert main(["models", "--delete", A, "--yes"]) == 0
    assert capsys.readouterr().out.strip().startswith("deleted test-org/Alpha-GGUF:")
    assert not _storage(tmp_path, A).exists()
    assert [r.repo for r in disk_use().repos] == [B]
    for path in two_repos["paths"].values():
        if "beta" in path.name:
            assert path.read_bytes() == next(f for f in two_repos["beta"] if f.name == path.name).read_bytes()
    with pytest.raises(WorkbenchError, match="is not in the HF cache"):
        delete_cached_model(A)
    assert alpha_size > 0


def test_a_blob_another_repository_links_survives_deleting_one(two_repos, tmp_path):
    """Alpha's second revision links Beta's blob (as a deduplicating tool or a planted link would);
    deleting Alpha's revisions one by one never removes Beta's file."""
    beta_q8 = next(p for p in two_repos["paths"].values() if p.name == "beta-Q8_0.gguf")
    beta_blob = beta_q8.resolve()
    alpha = _storage(tmp_path, A)
    other_commit = "f" * 40
    (alpha / "snapshots" / other_commit).mkdir()
    os.symlink(os.path.relpath(beta_blob, alpha / "snapshots" / other_commit), alpha / "snapshots" / other_commit / "x.gguf")
    outside = tmp_path / "precious.gguf"
    outside.write_bytes(b"not the cache's")
    os.symlink(outside, alpha / "snapshots" / other_commit / "y.gguf")

    use = {r.repo: r for r in disk_use().repos}
    assert use[A].size_bytes == two_repos["alpha"].stat().st_size  # the foreign and outside files are not Alpha's bytes

    deleted = delete_cached_model(A, revision=other_commit)
    assert sorted(deleted.kept) == sorted([beta_blob, outside])
    assert beta_blob.read_bytes() == two_repos["beta"][0].read_bytes() and outside.read_bytes() == b"not the cache's"
    assert deleted.freed_bytes == 0 and not (alpha / "snapshots" / other_commit).exists()
    assert delete_cached_model(A).freed_bytes == two_repos["alpha"].stat().st_size
    assert beta_q8.read_bytes() == two_repos["beta"][0].read_bytes()


def test_a_blob_two_revisions_share_survives_deleting_one(hub, tmp_path):
    first = write_tiny_gguf(tmp_path / "gamma-Q4_K_M.gguf", seed=4)
    old = hub.add_repo("test-org/Gamma-GGUF", {first.name: first}).commit
    download_model("test-org/Gamma-GGUF", first.name)
    second = write_tiny_gguf(tmp_path / "gamma-Q8_0.gguf", seed=5)
    new = hub.add_repo("test-org/Gamma-GGUF", {first.name: first, second.name: second}).commit
    kept = download_model("test-org/Gamma-GGUF", first.name).path
    download_model("test-org/Gamma-GGUF", second.name)
    assert old != new and f"/snapshots/{new}/" in str(kept)

    deleted = delete_cached_model("test-org/Gamma-GGUF", revision=old[:12])
    assert deleted.what == f"test-org/Gamma-GGUF@{old[:12]}" and deleted.freed_bytes == 0 and deleted.kept == ()
    assert kept.read_bytes() == first.read_bytes()
    (repo,) = disk_use().repos
    assert repo.revisions == (new,) and repo.size_bytes == first.stat().st_size + second.stat().st_size


def test_hostile_names_delete_nothing(hub, tmp_path, capsys):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.gguf").write_bytes(b"keep")
    for hostile in ("../../etc/passwd", "a/b/c", "owner/..", "x" * 300):
        with pytest.raises(WorkbenchError):
            delete_cached_model(hostile)
    assert main(["models", "--delete", "../elsewhere", "--yes"]) == 2
    assert "../elsewhere: is not a model file in the workbench's own folder" in capsys.readouterr().err
    assert main(["models", "--delete", "owner/..x", "--yes"]) == 2
    assert "'owner/..x' is not a repository id" in capsys.readouterr().err
    with pytest.raises(WorkbenchError, match="not a model file in the workbench's own folder"):
        delete_local_model(outside / "keep.gguf")
    own = quantized_dir()
    own.mkdir(parents=True)
    os.symlink(outside / "keep.gguf", own / "link.gguf")
    os.symlink(outside, own / "sub")
    for path in (own / "link.gguf", own / "sub" / "keep.gguf", own / ".." / ".." / "elsewhere" / "keep.gguf"):
        with pytest.raises(WorkbenchError, match="not a model file"):
            delete_local_model(path)
    assert (outside / "keep.gguf").read_bytes() == b"keep"
    assert [f.deletable for f in disk_use().local] == []  # links are not counted as the workbench's files

    made = own / "made.Q4_0.gguf"
    made.write_bytes(b"y" * 10)
    assert delete_local_model(made).freed_bytes == 10 and not made.exists()
