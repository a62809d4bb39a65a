"""Device profiles: shipped boards with sourced figures, loading errors, user devices, the detected host, CLI."""

from __future__ import annotations

import json
import os
import threading
import tomllib
from pathlib import Path

import psutil
import pytest
from test_presets import assert_clear_error

from workbench.cli.main import main
from workbench.core.config import bandwidth
from workbench.core.config.bandwidth import host_bandwidth, machine_key, measure_read_bandwidth
from workbench.core.config.devices import device_catalog, device_origin, list_devices, load_device
from workbench.core.config.host import detect_host, os_reserve_mb
from workbench.core.errors import PresetError
from workbench.core.paths import data_dir

SHIPPED = ("jetson-orin-nano-8gb", "raspberry-pi-5-8gb", "rk3588-8gb", "rk3588s-4gb", "x86-mini-pc-16gb")
MIB = 1 << 20


@pytest.fixture(autouse=True)
def own_dirs(tmp_path, monkeypatch):
    """Every test gets its own empty config and cache folders, and a 16 MB probe to stay quick."""
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(bandwidth, "_probe_buffer_mb", lambda: 16)
    return tmp_path


def write(folder: Path, text: str, name: str = "board.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


GOOD = 'name = "board"\nram_total_mb = 8192\nmem_bandwidth_gbs = 25.6\ncores = 4\n'


# --- shipped devices ------------------------------------------------------------------

def test_every_shipped_device_loads_and_sources_every_figure():
    files = sorted(data_dir("presets").joinpath("devices").glob("*.toml"))
    assert tuple(path.stem for path in files) == SHIPPED
    for path in files:
        device = load_device(path.stem)
        assert device.name == path.stem and device.description
        assert device_origin(device) == "shipped"
        assert 0 < device.budget_mb < device.ram_total_mb
        assert device.mem_bandwidth_gbs > 0 and device.cores >= 1
        notes = dict(device.notes)
        figures = ["ram_total_mb", "mem_bandwidth_gbs", "power_limit_w", "cores"]
        figures += [f"reserves_mb.{name}" for name, _ in device.reserves_mb]
        for figure in figures:  # power_limit_w too: where absent, the note says why
            assert len(notes.get(figure, "")) > 20, f"{path.name}: {figure} has no source"


def test_the_jetson_profile_is_the_design_ledger():
    jetson = load_device("jetson-orin-nano-8gb")
    assert jetson.ram_total_mb == 8192
    assert dict(jetson.reserves_mb) == {"os": 1200, "dma_frame_buffers": 800}
    assert jetson.budget_mb == 6192
    assert (jetson.mem_bandwidth_gbs, jetson.power_limit_w, jetson.cores) == (68, 15, 6)


def test_bandwidth_figures_follow_from_bus_width_and_transfer_rate():
    # Theoretical peak = transfers per second x bus bytes; the notes give both.
    expected = {"rk3588-8gb": 4224e6 * 8, "rk3588s-4gb": 4224e6 * 8, "raspberry-pi-5-8gb": 4267e6 * 4,
                "x86-mini-pc-16gb": 4800e6 * 8}
    for name, bytes_per_second in expected.items():
        assert load_device(name).mem_bandwidth_gbs == pytest.approx(bytes_per_second / 1e9, abs=0.05)


def test_unpublished_power_limits_are_unknown_not_zero():
    assert load_device("rk3588-8gb").power_limit_w is None


# --- loading errors ---------------------------------------------------------------------

ERROR_CASES = [
    (GOOD + "power = 5\n", 5, 'unknown key "power"', 'Did you mean "power_limit_w"'),
    (GOOD.replace("8192", "8"), 2, "ram_total_mb = 8 is tiny", "ram_total_mb = 8192"),
    (GOOD.replace("25.6", '"fast"'), 3, 'mem_bandwidth_gbs = "fast" is a text value', "mem_bandwidth_gbs = 68"),
    (GOOD.replace("25.6", "0"), 3, "mem_bandwidth_gbs = 0 is out of range", "above 0"),
    (GOOD.replace("cores = 4", "cores = 0"), 4, "cores = 0 is below the minimum of 1", "cores = 6"),
    (GOOD + "power_limit_w = -15\n", 5, "power_limit_w = -15 is out of range", "power_limit_w = 15"),
    (GOOD + "[reserves_mb]\nos = 9000\n", 5, "reserves add up to 9000 MB", "[reserves_mb]"),
    (GOOD + "[reserves_mb]\nos = \"1 GB\"\n", 6, 'os = "1 GB" is a text value, expected a whole number of MB',
     "os = 1200"),
    (GOOD + "[reserves_mb]\nOS-Reserve = 100\n", 6, 'reserve name "OS-Reserve"', "dma_frame_buffers = 800"),
    (GOOD + "reserves_mb = 600\n", 5, "reserves_mb = 600 is a whole number, expected a table", "[reserves_mb]"),
    (GOOD + "[reserves_mb]\nos = 100\n[notes]\nram_totl_mb = \"x\"\n", 8, 'unknown key "ram_totl_mb" in [notes]',
     'Did you mean "ram_total_mb"'),
    (GOOD + "[notes]\ncores = 4\n", 6, "cores = 4 is a whole number, expected a text value", "where the figure"),
    (GOOD.replace('"board"', '"host"'), 1, 'the name "host" is taken', "my-board"),
    (GOOD + 'cpu_features = ["neon", "avx3"]\n', 5, "cpu_features names 'avx3', which the workbench does not know",
     'cpu_features = ["neon", "dotprod"]'),
    (GOOD + 'cpu_features = "dotprod"\n', 5, "cpu_features = 'dotprod' is not a list of feature names", "from: avx2"),
    (GOOD + "cpu_features = [" + ", ".join(['"neon"'] * 17) + "]\n", 5, "is not a list of feature names", "from: avx2"),
    ('name = "board"\nram_total_mb = 8192\n[reserves_mb\n', 3, "not valid TOML", "Fix the syntax"),
]


@pytest.mark.parametrize(("text", "line", "what", "fix"), ERROR_CASES)
def test_a_broken_device_names_file_line_and_fix(own_dirs, text, line, what, fix):
    assert_clear_error(load_device, write(own_dirs, text), line, what, fix)


def test_a_missing_figure_names_the_file_and_the_line_to_add(own_dirs):
    path = write(own_dirs, 'name = "board"\nram_total_mb = 8192\ncores = 4\n')
    with pytest.raises(PresetError) as caught:
        load_device(str(path))
    assert str(caught.value).startswith(f"{path}: missing mem_bandwidth_gbs")
    assert "mem_bandwidth_gbs = 68" in caught.value.fix


def test_unknown_device_name_suggests_the_closest():
    with pytest.raises(PresetError) as caught:
        load_device("jetson")
    assert 'Did you mean "jetson-orin-nano-8gb"' in caught.value.fix
    assert "host" in caught.value.fix


# --- user devices -------------------------------------------------------------------

def test_user_devices_are_listed_and_override_shipped_ones(own_dirs):
    user = own_dirs / "config" / "devices"
    write(user, GOOD.replace('"board"', '"bench-board"') + "[reserves_mb]\nos = 512\n", "bench-board.toml")
    write(user, GOOD.replace('"board"', '"rk3588-8gb"').replace("25.6", "19.5"), "rk3588-8gb.toml")
    devices = {d.name: d for d in list_devices(include_host=False)}
    assert set(devices) == set(SHIPPED) | {"bench-board"}
    assert device_origin(devices["bench-board"]) == "user" and devices["bench-board"].budget_mb == 8192 - 512
    assert device_origin(devices["rk3588-8gb"]) == "user"
    assert load_device("rk3588-8gb").mem_bandwidth_gbs == 19.5


# --- the detected host ----------------------------------------------------------------

def test_host_detection_reports_this_machines_ram_and_cores(own_dirs):
    host = load_device("host")
    memory = psutil.virtual_memory()
    assert host.name == "host" and device_origin(host) == "detected"
    assert host.ram_total_mb == memory.total // MIB
    assert host.cores == (psutil.cpu_count(logical=False) or psutil.cpu_count())
    (name, reserve), = host.reserves_mb
    assert name == "os" and 0 < reserve < host.ram_total_mb and reserve % 10 == 0
    assert host.mem_bandwidth_gbs > 0
    assert host.power_limit_w is None  # not detected: unknown, never 0
    notes = dict(host.notes)
    assert "measured on this machine" in notes["mem_bandwidth_gbs"]
    assert set(notes) == {"ram_total_mb", "reserves_mb.os", "mem_bandwidth_gbs", "power_limit_w", "cores"}


def test_os_reserve_is_total_minus_available_rounded_up():
    assert os_reserve_mb(8192 * MIB, 6144 * MIB) == 2048 + 2  # 2048 rounds up to the next 10 MB
    assert os_reserve_mb(8192 * MIB, 8192 * MIB - 1) == 10
    assert os_reserve_mb(8192 * MIB, 8192 * MIB - 10 * MIB) == 10


def test_the_bandwidth_probe_reads_with_every_thread():
    threads_before = threading.active_count()
    measurement = measure_read_bandwidth(buffer_mb=16, passes=3, threads=2)
    assert measurement.gbs > 0
    assert 1 <= measurement.passes <= 3 and measurement.threads == 2
    assert measurement.gbs == pytest.approx(2 * 16 * MIB / measurement.best_seconds / 1e9, rel=0.01)
    assert measurement.machine == machine_key()
    assert threading.active_count() == threads_before  # the probe's reader threads are gone


def test_the_default_probe_buffer_outgrows_caches_but_not_small_boards(monkeypatch):
    monkeypatch.undo()  # the real size rule, not the tests' 16 MB
    assert 16 <= bandwidth._probe_buffer_mb() <= 64


def test_the_probe_runs_once_per_machine_and_is_cached(own_dirs, monkeypatch):
    first = host_bandwidth()
    cache = own_dirs / "cache" / "host_bandwidth.json"
    stored = json.loads(cache.read_text())
    assert stored[machine_key()]["gbs"] == first.gbs and not first.from_cache

    def no_probe(*args, **kwargs):
        raise AssertionError("measured again although the cache has this machine")

    monkeypatch.setattr(bandwidth, "measure_read_bandwidth", no_probe)
    second = host_bandwidth()
    assert second.from_cache and second.gbs == first.gbs and second.measured_at == first.measured_at
    assert "(cached)" in dict(detect_host().notes)["mem_bandwidth_gbs"]


def test_a_damaged_cache_is_measured_again_and_rewritten(own_dirs):
    cache = own_dirs / "cache" / "host_bandwidth.json"
    cache.parent.mkdir(parents=True)
    cache.write_text("{not json")
    measured = host_bandwidth()
    assert not measured.from_cache
    assert json.loads(cache.read_text())[machine_key()]["gbs"] == measured.gbs


def test_another_machine_in_the_cache_is_not_reused(own_dirs):
    cache = own_dirs / "cache" / "host_bandwidth.json"
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"other|aarch64|Cortex-A76|8000 MB": {"gbs": 999.0}}))
    measured = host_bandwidth()
    assert not measured.from_cache and measured.gbs != 999.0
    assert set(json.loads(cache.read_text())) == {"other|aarch64|Cortex-A76|8000 MB", machine_key()}


# --- CLI --------------------------------------------------------------------------------

def test_cli_lists_devices_with_budgets(capsys):
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    header, *rows = out.splitlines()
    for column in ("NAME", "RAM MiB", "RESERVES MiB", "BUDGET MiB", "BANDWIDTH GB/s", "POWER W", "CORES"):
        assert column in header
    jetson = next(row for row in rows if row.startswith("jetson-orin-nano-8gb"))
    assert "2000 (os 1200, dma_frame_buffers 800)" in jetson
    assert jetson.split()[-5:] == ["6192", "68", "15", "6", "shipped"]
    rk = next(row for row in rows if row.startswith("rk3588-8gb"))
    assert "unknown" in rk.split()  # no published power limit
    assert any(row.startswith("host ") and row.endswith("detected") for row in rows)


def test_cli_remeasure_probes_again(capsys, own_dirs):
    assert main(["devices", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)[-1]
    assert main(["devices", "--json", "--remeasure"]) == 0
    again = json.loads(capsys.readouterr().out)[-1]
    assert first["name"] == again["name"] == "host"
    assert "(cached)" not in again["notes"]["mem_bandwidth_gbs"]
    stored = json.loads((own_dirs / "cache" / "host_bandwidth.json").read_text())[machine_key()]
    assert again["mem_bandwidth_gbs"] == stored["gbs"]
    assert main(["devices", "--json"]) == 0
    assert "(cached)" in json.loads(capsys.readouterr().out)[-1]["notes"]["mem_bandwidth_gbs"]


def test_cli_devices_json_parses(capsys):
    assert main(["devices", "--json", "--no-host"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [entry["name"] for entry in listed] == list(SHIPPED)
    jetson = listed[0]
    assert (jetson["ram_total_mb"], jetson["budget_mb"], jetson["reserves_mb"]) == (
        8192, 6192, {"os": 1200, "dma_frame_buffers": 800})
    assert "datasheet" in jetson["notes"]["mem_bandwidth_gbs"]
    rk = next(entry for entry in listed if entry["name"] == "rk3588-8gb")
    assert rk["power_limit_w"] is None


def test_cli_show_gives_each_figures_source(capsys):
    assert main(["devices", "show", "raspberry-pi-5-8gb"]) == 0
    out = capsys.readouterr().out
    assert "17.1 GB/s" in out and "source: theoretical: LPDDR4X-4267 on a 32-bit bus" in out
    assert main(["devices", "show", "host", "--json"]) == 0
    host = json.loads(capsys.readouterr().out)
    assert host["name"] == "host" and host["ram_total_mb"] == psutil.virtual_memory().total // MIB


def test_cli_bad_device_is_one_line_on_stderr(capsys, own_dirs):
    path = write(own_dirs, GOOD + "[reserves_mb]\nos = 9000\n")
    assert main(["devices", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}:5" in err


def test_shipped_device_files_parse_as_plain_toml():
    for path in data_dir("presets").joinpath("devices").glob("*.toml"):
        data = tomllib.loads(path.read_text())
        assert set(data) <= {"name", "description", "ram_total_mb", "mem_bandwidth_gbs", "power_limit_w", "cores",
                             "fast_cores", "reserves_mb", "notes", "accelerator", "vram_mb", "vram_bandwidth_gbs",
                             "accelerator_slower_than_cpu", "effective_bandwidth_gbs", "effective_gflops",
                             "effective_backend", "cpu_features"}


def test_a_figure_cached_by_another_probe_method_is_measured_again(own_dirs):
    # A cached entry with every field but written by an earlier probe (here an impossible
    # 1741 GB/s from a mis-timed pass) must not stay the host's bandwidth forever.
    cache = own_dirs / "cache" / "host_bandwidth.json"
    cache.parent.mkdir(parents=True)
    stale = {"gbs": 1741.87, "buffer_mb": 64, "threads": 2, "passes": 5, "best_seconds": 7.7e-05,
             "measured_at": "2026-01-01T00:00:00+00:00", "machine": machine_key()}
    cache.write_text(json.dumps({machine_key(): stale}))
    measured = host_bandwidth()
    assert not measured.from_cache and measured.gbs != 1741.87
    assert json.loads(cache.read_text())[machine_key()]["probe"] == bandwidth.PROBE_VERSION
    assert host_bandwidth().from_cache


def test_the_table_fits_an_80_column_terminal_and_stays_whole_in_a_pipe():
    from workbench.cli.cmd_devices import devices_table
    from workbench.core.config.devices import list_devices

    devices = list_devices(include_host=False)
    narrow = devices_table(devices, 80)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    jetson = next(line for line in narrow.splitlines() if line.startswith("jetson-orin-nano-8gb"))
    assert jetson.split()[1:] == ["8192", "2000", "6192", "68", "15", "6", "shipped"]
    assert "2000 (os 1200, dma_frame_buffers 800)" in devices_table(devices)


# -- hostile device files (issue 10, item 6) ------------------------------------------------

def test_one_broken_user_device_is_named_and_the_others_still_listed(own_dirs, capsys):
    user = own_dirs / "config" / "devices"
    write(user, GOOD)
    write(user, GOOD.replace('"board"', '"deep"') + "notes = " + "{a = " * 400 + "1" + "}" * 400 + "\n", "deep.toml")
    write(user, GOOD.replace('"board"', '"bom"'), "bom.toml")
    (user / "bom.toml").write_bytes(b"\xef\xbb\xbf" + (user / "bom.toml").read_bytes())
    (user / "latin1.toml").write_bytes(b'name = "latin1"\n# caf\xe9\nram_total_mb = 8192\n')
    catalog = device_catalog()
    names = [d.name for d in catalog.entries]
    assert "board" in names and "bom" in names and "jetson-orin-nano-8gb" in names
    assert [Path(b.path).name for b in catalog.broken] == ["deep.toml", "latin1.toml"]
    assert "values nested more than 32 levels deep" in catalog.broken[0].line
    before_e_acute = len(b'name = "latin1"\n# caf')
    assert f"not UTF-8 text (byte {before_e_acute})" in catalog.broken[1].line
    assert catalog.broken[0].line.startswith(f"broken: {user / 'deep.toml'}:5: ")
    assert catalog.broken[1].line.startswith(f"broken: {user / 'latin1.toml'}:2: ")
    assert main(["devices", "--no-host"]) == 0
    out = capsys.readouterr().out
    assert f"broken: {user / 'deep.toml'}:5: values nested" in out and "\nboard " in out


def test_the_hosts_cpu_features_are_read_bounded_and_a_planted_file_is_refused(tmp_path):
    from workbench.core.config.cpu_features import host_cpu_features

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor : 0\nFeatures : fp asimd asimddp i8mm\n" + "x" * (1 << 20) + "\nflags : avx2\n")
    read = host_cpu_features(cpuinfo)
    assert read.features == {"neon", "dotprod", "i8mm"} and str(cpuinfo) in read.source  # the first CPU's line
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    planted = host_cpu_features(fifo)  # opened without blocking, refused: not a regular file
    assert planted.features == frozenset() and planted.source.startswith("unavailable")
    assert host_cpu_features(tmp_path / "missing").source.startswith("unavailable")
