"""Fuzz: random mirror answers (ids, commits, file names, sizes, ETags, headers, bodies) never write outside the caches.

Each case gives the real test server a random hostile answer set, then runs the download
and the header preview against it. Every case must end in a result or one WorkbenchError
line (never another exception), and the tree beside the caches must be byte-for-byte what
it was. Climbing names stay shallow enough (at most four `..`) and absolute names point into
the test's own folder, so an escape lands where the snapshot sees it. Seeded: a failure
prints the seed and the case, and `FUZZ_SEED=<seed>` replays it.
"""

from __future__ import annotations

import hashlib
import os
import random

import pytest

from gguf_factory import TinyModel, write_tiny_gguf
from hubserver import Fault, Hostile, hub, hub_cache, sha256_of, tree_outside_caches  # noqa: F401 - hub is a fixture
from workbench.core.errors import WorkbenchError
from workbench.core.hub.download import download_model
from workbench.core.hub.preview import read_remote_header

REPO = "fuzz/Mirror-GGUF"
CASES = 200
SEED = int(os.environ.get("FUZZ_SEED", "20261130"))


@pytest.fixture(scope="module")
def served_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz-models")
    small = write_tiny_gguf(folder / "small-Q4_K_M.gguf", TinyModel(n_layer=1, n_embd=64, n_head=2, n_head_kv=1, n_ff=128, n_vocab=32))
    noise = folder / "noise.gguf"
    noise.write_bytes(random.Random(1).randbytes(40_000))
    return {"small-Q4_K_M.gguf": small, "noise.gguf": noise}


def _hostile_values(rng: random.Random, tmp_path, real: str, kind: str) -> object:
    climb = "../" * rng.randint(1, 4)
    pool = [
        real, real, real,
        climb + "victim/file", climb + "victim", "/" + str(tmp_path / "victim" / "abs").lstrip("/"),
        "", None, 7, 1.5, ["x"], {"a": 1}, "a" * rng.choice((39, 41, 64, 300, 5000)),
        "A" * 40, "0" * 64, hashlib.sha1(str(rng.random()).encode()).hexdigest(), hashlib.sha256(str(rng.random()).encode()).hexdigest(),
        "x\x00y", "x\ny", "a\\..\\b", "a//b", "./x", "sub/../../x", "%2e%2e/x", "\u202e.gguf",
    ]
    if kind == "name":
        pool += [climb + "victim/m.gguf", "sub/" + climb + "victim/m.gguf", str(tmp_path / "victim" / "m.gguf"),
                 "m-00000-of-00002.gguf", "m-00003-of-00002.gguf", "m-00001-of-00002.gguf", "x" * 256 + ".gguf", "dir/.gguf"]
    if kind == "etag":
        pool += [f'"{climb}victim/file"', f'W/"{real}"', f'"{real}"', f'"{real}', f'W/{real}', '""']
    if kind == "size":
        pool = [real, real, -1, 0, 2**41, 10**30, "12", None, 1.5, True]
    return rng.choice(pool)


def _header_text(value: object) -> str:
    """Any value as a header can carry it (printable ASCII; the rest escaped), so the server sends it as given."""
    text = value if isinstance(value, str) else str(value)
    return "".join(char if 32 <= ord(char) < 127 else f"\\x{ord(char):02x}" for char in text)


def _case(rng: random.Random, tmp_path, hub, served_files) -> tuple[str, dict]:
    """One random answer set. A third of the cases are an honest mirror with one lie at most
    (or only a broken body), so the fuzz also reaches the code that writes, not only the checks."""
    names = list(served_files)
    honest = rng.random() < 0.35
    lie = rng.choice(["name", "size", "sha256", "etag", "commit", "body"]) if honest else None

    def maybe(real: object, kind: str) -> object:
        return _hostile_values(rng, tmp_path, real, kind) if not honest or lie == kind else real

    siblings = []
    for _ in range(rng.randint(1, 3)):
        served = rng.choice(names)
        path = served_files[served]
        size, sha = path.stat().st_size, sha256_of(path)
        entry = {"rfilename": maybe(served, "name"), "size": maybe(size, "size")}
        lfs = "real" if honest and lie != "sha256" else rng.choice(["real", "real", "hostile", None, "garbage", {}])
        if lfs == "real":
            entry["lfs"] = {"sha256": sha, "size": entry["size"], "pointerSize": 135}
        elif lfs == "hostile":
            entry["lfs"] = {"sha256": _hostile_values(rng, tmp_path, sha, "etag"), "size": _hostile_values(rng, tmp_path, size, "size"), "pointerSize": 1}
        elif lfs is not None:
            entry["lfs"] = lfs
        siblings.append(entry)
    repo = hub.repos[REPO]
    served_name = rng.choice(names)
    served_path = served_files[served_name]
    if honest:  # the resolve answers for the file asked for, as the real hub gives them
        first = siblings[0]["rfilename"]
        served_name = first if isinstance(first, str) and first in served_files else served_name
        served_path = served_files[served_name]
    hostile = Hostile(
        info={"id": REPO if honest else rng.choice([REPO, REPO, "../" + REPO, "fuzz/../../x", "x" * 120 + "/y", 5, None]),
              "sha": maybe(repo.commit, "commit")},
        siblings=siblings if honest else rng.choice([siblings, siblings, siblings, "not a list", [1, 2], None]),
        serve=served_name,
    )
    for header, real in (("X-Linked-Etag", f'"{sha256_of(served_path)}"'), ("X-Repo-Commit", repo.commit),
                         ("X-Linked-Size", str(served_path.stat().st_size)), ("ETag", '"' + "b" * 40 + '"')):
        if honest and not (lie == "etag" and "tag" in header.lower()):
            continue
        choice = rng.random()
        if choice < 0.15:
            hostile.resolve_headers[header] = None  # left out
        elif choice < 0.5:
            value = _hostile_values(rng, tmp_path, real, "etag" if "tag" in header.lower() else "size" if "Size" in header else "commit")
            hostile.resolve_headers[header] = _header_text(value)
    if not honest and rng.random() < 0.1:
        hostile.resolve_headers["Location"] = rng.choice(["file:///etc/passwd", "javascript:x", "/relative", "http://127.0.0.1:1/x"])
    repo.hostile = hostile
    fault = None if honest and lie != "body" else rng.choice([None, None, Fault(oversend=rng.randint(1, 200_000)), Fault(endless=True),
                        Fault(corrupt_at=rng.randint(0, 30_000)), Fault(cut_after=rng.randint(0, 30_000))])
    hub.faults.clear()
    if fault is not None:
        hub.set_fault(REPO, served_name, fault)
    listed = [s.get("rfilename") for s in siblings if isinstance(s, dict)]
    target = rng.choice([n for n in listed if isinstance(n, str) and n] or ["small-Q4_K_M.gguf"])
    if honest:
        target = listed[0] if isinstance(listed[0], str) and listed[0] else target
    return target, {"hostile": hostile, "fault": fault}


def test_random_mirror_answers_never_write_outside_the_caches(hub, served_files, tmp_path):
    hub.add_repo(REPO, dict(served_files))
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "file").write_text("precious")
    hub_cache(tmp_path).mkdir(parents=True)  # the caches' own folders exist, as on a machine that has used them
    (tmp_path / "wb-cache").mkdir()
    baseline = tree_outside_caches(tmp_path)
    rng = random.Random(SEED)
    outcomes = {"refused or failed cleanly": 0, "succeeded": 0}
    for number in range(CASES):
        target, case = _case(rng, tmp_path, hub, served_files)

        for action in (lambda: download_model(REPO, target, max_attempts=1), lambda: read_remote_header(REPO, target)):
            try:
                action()
                outcomes["succeeded"] += 1
            except WorkbenchError as error:
                assert "\n" not in str(error), f"seed {SEED} case {number}: a multi-line error {error!r}"
                outcomes["refused or failed cleanly"] += 1
            except Exception as error:  # noqa: BLE001 - the point of the test
                pytest.fail(f"seed {SEED} case {number} ({target!r}, {case}): {type(error).__name__}: {error}")
        assert tree_outside_caches(tmp_path) == baseline, f"seed {SEED} case {number} ({target!r}, {case}) wrote outside the caches"
    # Both kinds of outcome happened: the fuzz reached the writing code, not only the validators.
    print(f"fuzz seed {SEED}: {outcomes}")
    assert outcomes["succeeded"] > 0 and outcomes["refused or failed cleanly"] > 0, outcomes
    assert any(hub_cache(tmp_path).rglob("*.incomplete")) or any(hub_cache(tmp_path).rglob("blobs/*"))
