"""The fast cores from recorded /sys trees, threads = 0 and the cpu_cores key, and the engine pinned to them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import tomli_w
from real_engine import ROOMY
from textual.app import App, ComposeResult

from workbench.core.config import cpu_topology
from workbench.core.config.cpu_topology import format_cpu_list, parse_cpu_list, read_cpu_topology
from workbench.core.config.preset import Preset
from workbench.core.config.preset_cores import core_choice
from workbench.core.config.presets import (
    llama_server_args,
    load_preset,
    preset_from_mapping,
    preset_problems,
    resolve_threads,
    save_user_preset,
)
from workbench.core.engine.client import EngineClient
from workbench.core.engine.cpu_pinning import pin_engine
from workbench.core.engine.events import Loaded
from workbench.core.errors import PresetError
from workbench.core.gguf.reader import read_gguf
from workbench.core.paths import bundled_model_path
from workbench.ui.themes import APP_COLOUR_DEFAULTS
from workbench.ui.widgets.chat_pane import ChatPane

SYSFS = Path(__file__).parent / "sysfs"
RK3588 = SYSFS / "rk3588-cpu-topology"  # each value's source: its SOURCE file
ORIN = SYSFS / "agx-orin-cpu-topology"
THIS_VM = SYSFS / "x86-vm-cpu-topology"  # captured on the build machine
CPU = "sys/devices/system/cpu"


def _copy(tree: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tree, tmp_path / tree.name))


def _flag(argv: tuple[str, ...], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


# --- which cores are fast ------------------------------------------------------------------

def test_rk3588_threads_0_is_the_four_a76_cores_pinned():
    topology = read_cpu_topology(RK3588)
    assert topology.heterogeneous and topology.basis == "cpu_capacity"
    assert topology.fast == (4, 5, 6, 7)
    assert "4 x Cortex-A76 (CPUs 4-7, capacity 1024)" in topology.reason
    assert "4 x Cortex-A55 (CPUs 0-3, capacity 397)" in topology.reason
    assert resolve_threads(Preset(name="p"), topology) == 4
    assert core_choice(Preset(name="p"), topology).cpus == (4, 5, 6, 7)
    argv = llama_server_args(Preset(name="p"), "m.gguf", topology=topology)
    assert _flag(argv, "-t") == "4" and _flag(argv, "--cpu-range") == "4-7"


def test_rk3588_without_cpu_capacity_falls_back_to_the_top_clocks(tmp_path):
    root = _copy(RK3588, tmp_path)
    for cpu in range(8):
        (root / CPU / f"cpu{cpu}" / "cpu_capacity").unlink()
    topology = read_cpu_topology(root)
    assert topology.basis == "cpuinfo_max_freq" and topology.fast == (4, 5, 6, 7)
    assert "2.40 GHz" in topology.reason and "1.80 GHz" in topology.reason


def test_a_binned_a76_cluster_is_still_a_fast_one(tmp_path):
    # Boards whose second A76 cluster tops out at 2256 MHz (lscpu "CPU max MHz: 2256.0000",
    # Joshua-Riek/ubuntu-rockchip#294); with no capacity the clocks decide.
    root = _copy(RK3588, tmp_path)
    for cpu in range(8):
        (root / CPU / f"cpu{cpu}" / "cpu_capacity").unlink()
    (root / CPU / "cpufreq/policy6/cpuinfo_max_freq").write_text("2256000\n")
    assert read_cpu_topology(root).fast == (4, 5, 6, 7)


def test_every_cpu_reading_1024_is_told_apart_by_its_clock(tmp_path):
    # A device tree without capacity-dmips-mhz leaves every CPU at 1024.
    root = _copy(RK3588, tmp_path)
    for cpu in range(4):
        (root / CPU / f"cpu{cpu}" / "cpu_capacity").write_text("1024\n")
    topology = read_cpu_topology(root)
    assert topology.basis == "cpuinfo_max_freq" and topology.fast == (4, 5, 6, 7)


def test_orin_cores_are_alike_and_keep_todays_rule():
    topology = read_cpu_topology(ORIN)
    assert not topology.heterogeneous and topology.fast == tuple(range(12))
    assert "12 x Cortex-A78AE" in topology.reason
    assert resolve_threads(Preset(name="p"), topology) == 11  # 12 physical cores minus one
    argv = llama_server_args(Preset(name="p"), "m.gguf", topology=topology)
    assert "--cpu-range" not in argv and "-C" not in argv


def test_this_machine_changes_nothing():
    topology = read_cpu_topology(THIS_VM)
    assert not topology.heterogeneous and topology.fast == (0, 1)
    assert resolve_threads(Preset(name="p"), topology) == 1
    assert core_choice(Preset(name="p"), topology).cpus == ()
    argv = llama_server_args(Preset(name="p"), "m.gguf", topology=topology)
    assert _flag(argv, "-t") == "1" and "--cpu-range" not in argv and "-C" not in argv


def test_the_older_hand_written_trees_without_cpu_folders_read_from_their_policies():
    assert read_cpu_topology(SYSFS / "rk3588").fast == (4, 5, 6, 7)  # 1.8 GHz little, 2.4 GHz big
    assert not read_cpu_topology(SYSFS / "jetson-orin-nano").heterogeneous
    empty = read_cpu_topology(SYSFS / "empty-container")
    assert empty.cpus == () and not empty.heterogeneous


# --- hostile files ---------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["99999", "-5", "0", "fast", "", "1e3", "9" * 40, "²", "٥١٢"])
def test_an_absurd_capacity_is_ignored_and_named(tmp_path, text):
    root = _copy(RK3588, tmp_path)
    (root / CPU / "cpu0/cpu_capacity").write_text(text + "\n")
    topology = read_cpu_topology(root)
    assert topology.cpus[0].capacity is None
    assert any("cpu0/cpu_capacity" in problem for problem in topology.problems)
    assert topology.fast == (4, 5, 6, 7)  # the clocks still tell the cores apart


def test_an_absurd_online_list_falls_back_to_the_cpu_folders(tmp_path):
    root = _copy(RK3588, tmp_path)
    (root / CPU / "online").write_text("0-4000000000\n")
    topology = read_cpu_topology(root)
    assert topology.all_cpus == tuple(range(8))
    assert any("online" in problem for problem in topology.problems)


def test_a_fifo_planted_in_the_tree_does_not_hang_the_read(tmp_path):
    root = _copy(RK3588, tmp_path)
    fifo = root / CPU / "cpu4/cpu_capacity"
    fifo.unlink()
    os.mkfifo(fifo)
    topology = read_cpu_topology(root)
    assert topology.cpus[4].capacity is None
    assert any("cpu4/cpu_capacity" in problem for problem in topology.problems)


def test_an_unreadable_file_is_named_not_raised():
    def reader(path: Path) -> str:
        if path.name == "cpu_capacity":
            raise PermissionError(13, "Permission denied")
        return cpu_topology.read_small(path)

    topology = read_cpu_topology(RK3588, reader=reader)
    assert all(cpu.capacity is None for cpu in topology.cpus)
    assert len([p for p in topology.problems if "Permission denied" in p]) == 8
    assert topology.fast == (4, 5, 6, 7)


def test_an_unknown_cluster_is_none_on_old_and_new_kernels(tmp_path):
    root = _copy(RK3588, tmp_path)
    (root / CPU / "cpu0/topology/cluster_id").write_text("-1\n")
    (root / CPU / "cpu1/topology/cluster_id").write_text("65535\n")
    topology = read_cpu_topology(root)
    assert topology.cpus[0].cluster is None and topology.cpus[1].cluster is None and topology.cpus[4].cluster == 1
    assert topology.problems == ()


def test_a_garbled_midr_names_no_core_type(tmp_path):
    root = _copy(RK3588, tmp_path)
    (root / CPU / "cpu0/regs/identification/midr_el1").write_text("0xzz\n")
    assert read_cpu_topology(root).cpus[0].part == ""


@pytest.mark.parametrize(("text", "cpus"), [("0-3,6", (0, 1, 2, 3, 6)), ("0 1 2 3", (0, 1, 2, 3)),
                                             ("4-7", (4, 5, 6, 7)), ("7,4,4", (4, 7)), ("", ())])
def test_cpu_lists_parse(text, cpus):
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text", ["7-4", "a", "4-", "-4", "0-512", "1.5", "0-3;6", "1" * 5000, "²", "٤-٧"])
def test_malformed_cpu_lists_are_refused(text):
    with pytest.raises(ValueError):
        parse_cpu_list(text)


def test_cpu_lists_print_as_ranges():
    assert format_cpu_list((6, 0, 1, 2, 3)) == "0-3,6"
    assert format_cpu_list((4,)) == "4"


# --- the cpu_cores key -----------------------------------------------------------------------

@pytest.fixture
def on_rk3588(monkeypatch):
    topology = read_cpu_topology(RK3588)
    monkeypatch.setattr(cpu_topology, "host_cpu_topology", lambda: topology)
    return topology


@pytest.mark.parametrize("value", ["4-7", [4, 5, 6, 7], [7, 6, 5, 4], "4,5,6-7"])
def test_cpu_cores_takes_a_list_or_a_range(on_rk3588, value):
    preset = preset_from_mapping({"name": "p", "cpu_cores": value})
    assert preset.cpu_cores == (4, 5, 6, 7)
    argv = llama_server_args(preset, "m.gguf")
    assert _flag(argv, "--cpu-range") == "4-7" and _flag(argv, "-t") == "4"


def test_cpu_cores_that_do_not_run_on_become_a_hex_mask(on_rk3588):
    preset = preset_from_mapping({"name": "p", "cpu_cores": [4, 6], "threads": 2})
    argv = llama_server_args(preset, "m.gguf")
    assert _flag(argv, "-C") == "0x50" and "--cpu-range" not in argv  # CPUs 4 and 6: bits 0b1010000


@pytest.mark.parametrize(("value", "words"), [
    ("7-4", "runs backwards"), ("four", "not a list of CPUs"), ([], "empty"), ("", "empty"),
    ([True], "not a CPU number"), ([-1], "not a CPU number"), ([4, "5"], "not a CPU number"),
    (4, "expected a CPU list"), ([8], "CPU 8, which this machine does not have (its CPUs are 0-7)"),
    ("0-600", "past the 512 CPUs"),
])
def test_bad_cpu_cores_name_the_line(on_rk3588, tmp_path, value, words):
    path = tmp_path / "p.toml"
    path.write_text('name = "p"\nthreads = 0\n' + tomli_w.dumps({"cpu_cores": value}))
    with pytest.raises(PresetError) as raised:
        load_preset(str(path))
    assert words in str(raised.value)
    assert raised.value.where == f"{path}:3"


def test_cpu_cores_are_saved_as_a_range_and_load_back(on_rk3588, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    path = save_user_preset(Preset(name="big-cores", cpu_cores=(4, 5, 6, 7)))
    assert 'cpu_cores = "4-7"' in path.read_text()
    assert load_preset("big-cores").cpu_cores == (4, 5, 6, 7)
    assert "cpu_cores" not in save_user_preset(Preset(name="plain")).read_text()


def test_more_threads_than_listed_cores_is_a_warning():
    model = read_gguf(bundled_model_path())
    problems = preset_problems(Preset(name="p", threads=8, cpu_cores=(4, 5, 6, 7)), model)
    assert [p.level for p in problems if "cpu_cores" in p.message] == ["warning"]


def test_an_explicit_thread_count_past_the_fast_cores_is_not_pinned():
    topology = read_cpu_topology(RK3588)
    assert core_choice(Preset(name="p", threads=8), topology).cpus == ()
    assert core_choice(Preset(name="p", threads=3), topology).cpus == (4, 5, 6, 7)


def test_shipped_presets_say_the_rule():
    for path in sorted((Path(__file__).parents[1] / "presets").glob("*.toml")):
        line = next(line for line in path.read_text().splitlines() if line.startswith("threads"))
        assert "one per fast core" in line and "physical cores minus one" in line, path


# --- the engine pinned -----------------------------------------------------------------------

def test_pinning_outside_the_engines_cpus_is_a_warning_not_a_failure():
    started_on = frozenset(os.sched_getaffinity(0))
    pinning = pin_engine(Preset(name="p", cpu_cores=(511,)), started_on)
    assert pinning.cpus == () and "outside the CPUs" in pinning.warning
    assert os.sched_getaffinity(0) == started_on


@pytest.fixture(scope="module")
def pinned_engine():
    """One engine for the module, loaded pinned to the first CPU this test may use."""
    cpu = min(os.sched_getaffinity(0))
    client = EngineClient()
    try:
        yield client, cpu, client.load_blocking(bundled_model_path(), Preset(name="pinned", ctx_size=256,
                                                                             cpu_cores=(cpu,)), device=ROOMY)
    finally:
        client.close()


def _allowed(pid: int) -> set[str]:
    """Cpus_allowed_list of every thread of `pid`."""
    lists = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        status = (task / "status").read_text()
        lists.add(next(line.split()[1] for line in status.splitlines() if line.startswith("Cpus_allowed_list")))
    return lists


def test_the_engine_runs_on_the_chosen_cores_then_on_all_again(pinned_engine):
    client, cpu, loaded = pinned_engine
    assert loaded.cpu_cores == (cpu,) and loaded.n_threads == 1
    assert os.sched_getaffinity(loaded.pid) == {cpu}
    assert _allowed(loaded.pid) == {str(cpu)}  # every thread, llama.cpp's included
    again = client.load_blocking(bundled_model_path(), Preset(name="free", ctx_size=256), device=ROOMY)
    assert again.cpu_cores == ()
    assert os.sched_getaffinity(again.pid) == os.sched_getaffinity(0)
    assert _allowed(again.pid) == {format_cpu_list(os.sched_getaffinity(0))}


# --- what `workbench devices` says ---------------------------------------------------------

def test_presets_show_on_rk3588_pins_the_llama_server_line(on_rk3588, capsys):
    from workbench.cli.main import main

    assert main(["presets", "show", "balanced-q4km"]) == 0
    out = capsys.readouterr().out
    assert "(threads = 0 resolved to 4 for this machine)  (pinned to CPUs 4-7)" in out
    assert " -t 4 " in out and out.rstrip().endswith("--cpu-range 4-7")


def test_devices_says_which_cores_and_why(on_rk3588, monkeypatch):
    from workbench.cli import cmd_devices

    monkeypatch.setattr(cmd_devices, "host_cpu_topology", lambda: on_rk3588)
    record = cmd_devices._host_cores()
    assert record["pinned_cpus"] == [4, 5, 6, 7] and record["threads_0"] == 4 and record["big_little"]
    line = cmd_devices._cores_line()
    assert line.startswith("Host cores: 4 threads (threads = 0: one per fast core) pinned to CPUs 4-7")
    assert "Cortex-A55" in line


# --- what the app says -----------------------------------------------------------------------

class _ChatAlone(App):
    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_COLOUR_DEFAULTS)

    def compose(self) -> ComposeResult:
        yield ChatPane(id="chat-pane")


async def test_the_chat_says_which_cores_the_engine_is_pinned_to_and_why():
    choice = core_choice(Preset(name="p"), read_cpu_topology(RK3588))
    loaded = Loaded(model_path="/m.gguf", preset_name="p", n_ctx=2048, n_ctx_train=8192, model_buffer_bytes=0,
                    kv_buffer_bytes=0, compute_buffer_bytes=0, load_seconds=1.0, rss_bytes=0, uss_bytes=0, pid=1,
                    n_threads=choice.threads, cpu_cores=choice.cpus, cores_note=choice.reason)
    app = _ChatAlone()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(ChatPane)
        await pane.model_loaded(loaded)
        await pane.model_loaded(loaded)  # a reload replaces the notice
        await pilot.pause()
        (notice,) = pane.query("#cores-notice")
        assert str(notice.query_one(".notice-title").render()) == "Engine pinned to CPUs 4-7"
        assert "4 x Cortex-A76" in str(notice.query_one(".notice-details").render())
        assert any("n_ctx 2048, 4 threads on CPUs 4-7, 1.00 s" in toast.message for toast in app._notifications)
