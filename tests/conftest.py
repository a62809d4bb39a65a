"""Fixtures every test module shares: a private home per test, and the CLI run in this process.

Hermetic: no test reads or writes the user's real config, caches, logs or Hugging Face
cache. From collection on, the whole session runs in a home of its own (so engines and
servers that module fixtures start never see the user's files either), and each test gets
a fresh one: HOME, the XDG folders and HF_HOME point into it, and the variables that would
lead elsewhere (WORKBENCH_*_DIR, HF_HUB_CACHE, HF_ENDPOINT, HF_TOKEN ...) are cleared. A
test that needs one of them sets it itself. The private homes live beside tmp_path, not in
it, so tests that list or walk tmp_path see only what they put there.
"""

from __future__ import annotations

import os
import shutil
import signal
import site
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from gguf_cache import CACHE_VARIABLE

# Where the workbench, platformdirs and huggingface_hub look for the user's files.
HOME_VARIABLES = ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "HF_HOME")
CLEARED_VARIABLES = (
    "WORKBENCH_CONFIG_DIR", "WORKBENCH_CACHE_DIR", "WORKBENCH_STATE_DIR", "WORKBENCH_API_KEY",
    "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_ASSETS_CACHE", "HF_XET_CACHE", "HF_TOKEN", "HF_TOKEN_PATH",
    "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT", "HF_HUB_OFFLINE", "HF_HUB_DOWNLOAD_TIMEOUT",
)


def home_environment(home: Path) -> dict[str, str]:
    """The variables that put every user folder under `home`."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "HF_HOME": str(home / ".cache" / "huggingface"),
    }


_SESSION: dict[str, object] = {}


def pytest_configure(config: pytest.Config) -> None:
    """The session's own home, set before collection imports anything that reads the environment."""
    # A suite started in the background of a shell without job control inherits SIGINT ignored, and its
    # children inherit that: the tests that press Ctrl-C on a CLI need the default (KeyboardInterrupt).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # A user-site install (pip install --user) is found through HOME: keep finding it there,
    # or every `python -m workbench` subprocess would lose its packages.
    user_base = site.getuserbase()
    home = Path(tempfile.mkdtemp(prefix="workbench-tests-home-"))
    saved = {name: os.environ.get(name)
             for name in (*HOME_VARIABLES, *CLEARED_VARIABLES, "PYTHONUSERBASE", "PYTHONDONTWRITEBYTECODE")}
    _SESSION.update(home=home, saved=saved, dont_write_bytecode=sys.dont_write_bytecode)
    os.environ.setdefault("PYTHONUSERBASE", user_base)
    # Bytecode caches (__pycache__, git-ignored) even where the environment turns them off: without them
    # each xdist worker compiles and assertion-rewrites all the test files again (12 s instead of 4 s of
    # collection here) and each of the suite's few hundred engine, node and CLI subprocesses compiles the
    # package again (~0.2 s each).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    for name in CLEARED_VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(home_environment(home))
    # One folder of written architecture files for the whole run (gguf_cache): made by the first process,
    # inherited by the xdist workers it starts, removed by it at the end.
    if not os.environ.get(CACHE_VARIABLE):
        cache = Path(tempfile.mkdtemp(prefix="workbench-tests-gguf-"))
        os.environ[CACHE_VARIABLE] = str(cache)
        _SESSION["gguf_cache"] = cache


def pytest_unconfigure(config: pytest.Config) -> None:
    sys.dont_write_bytecode = _SESSION.pop("dont_write_bytecode", sys.dont_write_bytecode)
    saved = _SESSION.pop("saved", {})
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    home = _SESSION.pop("home", None)
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)
    cache = _SESSION.pop("gguf_cache", None)
    if cache is not None:
        os.environ.pop(CACHE_VARIABLE, None)
        shutil.rmtree(cache, ignore_errors=True)


@pytest.fixture(autouse=True)
def private_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh home for this test: HOME, XDG folders and HF_HOME in it, overrides to elsewhere cleared.

    It holds one thing from earlier tests: this machine's bandwidth as the first test to measure it cached it
    (a user's second start), because the probe reads 128 MB for half a second, beside the other worker's
    timing, in each of the few hundred tests that price a ledger for the host. Tests of the probe and its
    cache give WORKBENCH_CACHE_DIR a folder of their own (test_devices.own_dirs)."""
    from workbench.core.config.bandwidth import cache_path

    home = tmp_path_factory.mktemp("home")
    for name in CLEARED_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in home_environment(home).items():
        monkeypatch.setenv(name, value)
    measured, theirs = _SESSION.get("bandwidth"), cache_path()
    if isinstance(measured, bytes):
        theirs.parent.mkdir(parents=True, exist_ok=True)
        theirs.write_bytes(measured)
    yield home
    if "bandwidth" not in _SESSION and theirs.is_file() and theirs.is_relative_to(home):
        _SESSION["bandwidth"] = theirs.read_bytes()


@pytest.fixture
def cli():
    """`cli(*argv, stdin="")` runs `workbench ARGV...` in this process (tests/cli_runner.py)."""
    from cli_runner import run_cli

    return run_cli


# The files that take longest (tens of seconds of real-engine, server or compositor work each, on the
# 2-core machine), longest first, as measured with three workers. With `--no-loadscope-reorder`
# (pyproject.toml) pytest-xdist hands out files in collection order, not by how many tests they
# hold (which put the one 60 s test of test_ui_memory last): starting these first lets the workers
# finish together instead of one running a long file alone at the end. Every other file keeps its
# place after them.
LONG_FILES = (
    "test_ui_memory.py", "test_fit_llama.py", "test_rpc_silent_node.py", "test_ui_flows.py",
    "test_graph_replay_ledger.py", "test_ui_snapshots.py", "test_engine_lifecycle.py", "test_arch_ledger.py",
    "test_rpc_split.py", "test_ui_real_engine_failures.py", "test_tasks_engine.py", "test_kld.py",
    "test_bench_measure_ops.py", "test_api_server.py", "test_fit_devices.py", "test_quantize.py",
    "test_engine_cli.py", "test_bench_sweep.py", "test_ui_tabs.py", "test_engine_sequences.py",
    "test_ui_screens.py", "test_arch_attention_ledger.py", "test_dvfs.py", "test_engine_overflow.py",
    "test_serve_browser.py", "test_ui_real_engine.py",
)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The collector paced as the app paces it (workbench/ui/collector.py): what the imports and the
    collection made is frozen, and the many in-process apps collect their young objects less often."""
    from workbench.ui.collector import pace_collector

    pace_collector()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: index for index, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))  # stable: the rest stay in order
