"""The hub's name forms (repo ids, commits, ETags, file paths, revisions) and the one path-joining helper, on real folders and links."""

from __future__ import annotations

import os

import pytest

from workbench.core.hub import names
from workbench.core.files.safe_paths import UnsafePathError, path_inside

# Valid and invalid ids from huggingface_hub's own validate_repo_id docstring (owner/name ones;
# the workbench always needs an owner), plus its stated rules: 96 characters, no '--' or '..'.
VALID_REPOS = ["foo/bar", "Qwen/Qwen2.5-0.5B-Instruct-GGUF", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", "a/Foo-BAR_foo.bar123", "u/" + "x" * 96]
INVALID_REPOS = ["datasets/foo/bar", "foo/.repo_id", "foo/foo--bar", "foo/foo.git", "foo/other..repo..id", "foo", "../x", "foo/..",
                 "/foo/bar", "foo/bar/", "foo/ba r", "foo/café", "u/" + "x" * 97, "foo/-bar", "foo/bar.", "", "foo\\bar/x"]


@pytest.mark.parametrize("repo", VALID_REPOS)
def test_repo_ids_in_the_hubs_form_are_accepted(repo):
    assert names.repo_id_problem(repo) is None


@pytest.mark.parametrize("repo", INVALID_REPOS)
def test_repo_ids_outside_the_hubs_form_are_refused(repo):
    assert names.repo_id_problem(repo) is not None


def test_commits_are_40_lowercase_hex():
    assert names.commit_problem("a" * 40) is None
    for bad in ("A" * 40, "a" * 39, "a" * 41, "../" + "a" * 37, "g" * 40, None, 7):
        assert names.commit_problem(bad) is not None


def test_etags_are_a_quoted_sha256_or_git_sha1_optionally_weak():
    sha256, sha1 = "ab" * 32, "cd" * 20
    # The forms huggingface_hub's _normalize_etag reads: "<tag>", W/"<tag>", and a bare tag.
    for raw, blob in ((f'"{sha256}"', sha256), (f'W/"{sha256}"', sha256), (sha256, sha256), (f'"{sha1}"', sha1)):
        assert names.etag_blob_name(raw) == blob
    for bad in ('"../../../../victim/file"', "../../x", '"' + "ab" * 31 + '"', f'"{sha256}', f'W/{sha256}"', f'"{sha256.upper()}"', "", None):
        assert names.etag_blob_name(bad) is None


@pytest.mark.parametrize("name", ["model-Q4_K_M.gguf", "sub/dir/model.gguf", "a b/c-00001-of-00002.gguf", ".hidden/x.gguf"])
def test_relative_file_names_are_accepted(name):
    assert names.file_name_problem(name) is None


@pytest.mark.parametrize("name", ["/etc/passwd", "../x.gguf", "a/../../x.gguf", "a/./b.gguf", "a//b.gguf", "a/", "a\\..\\b.gguf",
                                  "x\x00.gguf", "x\n.gguf", "", "a/" + "x" * 256, "x" * 1025])
def test_hostile_file_names_are_refused(name):
    assert names.file_name_problem(name) is not None


def test_revisions_follow_git_ref_rules():
    for good in ("main", "v1.0", "refs/pr/1", "a" * 40):
        assert names.revision_problem(good) is None
    for bad in ("../main", "a/../b", "ma in", "x:y", "a//b", "/main", "main/", "x.lock", ".hidden", "@", "a@{b", "", "x" * 256, "a\x00"):
        assert names.revision_problem(bad) is not None


def test_sizes_are_whole_non_negative_byte_counts_below_a_tebibyte():
    assert names.size_problem(0) is None and names.size_problem(5_000_000_000) is None
    for bad in (-1, 2**40 + 1, True, 1.5, "12", None):
        assert names.size_problem(bad) is not None


def test_a_refusal_is_one_line_naming_the_server_and_a_cut_value():
    error = names.refused("the ETag", "../" * 500, "is not a sha256", server="http://mirror.example")
    text = str(error)
    assert "\n" not in text and "http://mirror.example" in text and "'../../" in text and len(text) < 400


def test_path_inside_joins_plain_names_and_refuses_every_escape(tmp_path):
    root = tmp_path / "cache"
    root.mkdir()
    assert path_inside(root, "models--a--b", "snapshots/" + "a" * 40, "sub/m.gguf") == root / "models--a--b" / "snapshots" / ("a" * 40) / "sub" / "m.gguf"
    for parts in (("..", "x"), ("/etc/passwd",), ("a/../../x",), ("a//b",), ("",), ("a\x00b",), ("x" * 256,)):
        with pytest.raises(UnsafePathError):
            path_inside(root, *parts)


def test_path_inside_follows_planted_links_and_refuses_one_that_leads_out(tmp_path):
    root, outside = tmp_path / "cache", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "inner").mkdir()
    os.symlink(outside, root / "escape")  # a folder link planted in the cache
    os.symlink(outside / "victim", root / "file-link")  # a file link planted where we would write
    os.symlink("inner", root / "ok-link")  # a link that stays inside is fine
    with pytest.raises(UnsafePathError) as caught:
        path_inside(root, "escape", "blob", source="the hub at http://mirror.example")
    assert "leads outside" in str(caught.value) and "http://mirror.example" in str(caught.value)
    with pytest.raises(UnsafePathError):
        path_inside(root, "file-link")
    assert path_inside(root, "ok-link", "x") == root / "ok-link" / "x"
    os.symlink("loop", root / "loop")  # a link loop ends the walk without an exception other than ours
    with pytest.raises(UnsafePathError):
        path_inside(root, "loop", "x")


def test_the_partial_file_is_never_opened_through_a_link(tmp_path):
    # A link planted after path_inside checked the path (a race) still cannot redirect the writes.
    from workbench.core.hub.partial_file import open_partial

    victim = tmp_path / "victim"
    victim.write_text("precious")
    os.symlink(victim, tmp_path / "blob.incomplete")
    for mode in ("ab", "wb"):
        with pytest.raises(UnsafePathError):
            open_partial(tmp_path / "blob.incomplete", mode)
    assert victim.read_text() == "precious"
