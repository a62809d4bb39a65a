"""`workbench monitor --log FILE.csv|.jsonl` and `--prometheus PORT`: files a spreadsheet opens, rotation by
size, and metrics a Prometheus text parser reads. The figures come from a captured AGX Orin tegrastats log."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from workbench.cli.main import main
from workbench.core.errors import WorkbenchError
from workbench.core.telemetry.metrics import MetricsServer, exposition_text, sample_metrics
from workbench.core.telemetry.sample_log import SampleLog
from workbench.core.telemetry.sampler import Sampler

TREES = Path(__file__).parent / "sysfs"
EMPTY = str(TREES / "empty-container")
AGX_LOG = str(TREES / "tegrastats/agx-orin-jetpack6.log")  # lesomnus/tegra-exporter stats/parse_test.go
UNITS = ("_bytes", "_percent", "_celsius", "_hertz", "_watts", "_volts", "_joules")


def _monitor(*extra):
    return main(["monitor", "--interval", "0.1", "--root", EMPTY, "--tegrastats", AGX_LOG, "--quiet", *extra])


def _rows(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_csv_log_has_one_header_a_row_per_sample_and_every_source(tmp_path):
    log = tmp_path / "orin.csv"
    assert _monitor("--log", str(log)) == 0  # the log has three lines: three samples
    rows = _rows(log)
    # VDD_GPU_SOC + VDD_CPU_CV + VIN_SYS_5V0 per line: 2412+1607+4707 = 8726, 2412+1607+4607 = 8626,
    # 2412+1607+4707 = 8726 mW
    assert [row["power_total_watts"] for row in rows] == ["8.726", "8.626", "8.726"]
    assert rows[0]["power_total_watts source"] == (
        "source=sum of VDD_GPU_SOC+VDD_CPU_CV+VIN_SYS_5V0 (tegrastats log agx-orin-jetpack6.log)"
    )
    assert [row["load_percent[nvenc]"] for row in rows] == ["79", "78", "78"]  # NVENC 79%@166, 78%@166, 78%@179
    assert [row["device_clock_hertz[nvenc]"] for row in rows] == ["166000000", "166000000", "179000000"]
    assert rows[0]["temperature_celsius[junction]"] == "52.562"  # tj@52.562C
    assert rows[0]["memory_total_bytes"] == str(62841 * 1024 * 1024)  # RAM 18207/62841MB
    assert "clocks: no cpufreq (no clocks exposed)" in rows[0]["unavailable"]
    header = list(rows[0])
    figures = [column for column in header[2:-1] if not column.endswith(" source")]
    assert all(column.split("[")[0].endswith(UNITS) or column.startswith("throttled") for column in figures), figures
    assert all(f"{column} source" in header for column in figures)  # every figure has its source beside it

    assert _monitor("--log", str(log)) == 0  # appended: the same columns, the header not repeated
    text = log.read_text(encoding="utf-8")
    assert text.count("time_utc,") == 1 and len(_rows(log)) == 6
    assert log.read_bytes().endswith(b"\r\n")  # RFC 4180 line ends


def test_jsonl_log_holds_every_figure_and_its_source(tmp_path):
    log = tmp_path / "orin.jsonl"
    assert _monitor("--log", str(log)) == 0
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 3
    assert records[1]["total_power_w"] == pytest.approx(8.626)
    assert records[1]["total_power_source"].startswith("sum of VDD_GPU_SOC+VDD_CPU_CV+VIN_SYS_5V0")
    assert records[0]["time_utc"].endswith("+00:00")


def test_log_rotates_by_size_and_keeps_n_files(tmp_path):
    sampler = Sampler(EMPTY, tegrastats=AGX_LOG)
    samples = [sampler.sample() for _ in range(3)]
    log = SampleLog(tmp_path / "m.csv", max_bytes=4096, keep=2)
    for _ in range(20):
        for sample in samples:
            log.write(sample)
    files = sorted(path.name for path in tmp_path.iterdir())
    assert files == ["m.1.csv", "m.2.csv", "m.csv"]  # the oldest beyond two rotated files is gone
    for path in tmp_path.iterdir():
        assert path.stat().st_size <= 4096
        assert path.read_text().startswith("time_utc,monotonic_s,")  # each file opens in a spreadsheet alone
        assert all(len(row) == len(_rows(path)[0]) for row in _rows(path))


def test_a_new_figure_starts_a_new_file_not_a_wider_row(tmp_path):
    orin = Sampler(EMPTY, tegrastats=AGX_LOG).sample()
    thor = Sampler(EMPTY, tegrastats=str(TREES / "tegrastats/thor-jetpack7.log")).sample()  # nvenc0, VIN, ...
    log = SampleLog(tmp_path / "m.csv", keep=3)
    log.write(orin)
    log.write(thor)
    assert "power_rail_watts[VIN]" in _rows(tmp_path / "m.csv")[0]
    assert "power_rail_watts[VIN]" not in _rows(tmp_path / "m.1.csv")[0]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("monitor.txt", "a log file ends in .csv or .jsonl"),
        ("folder.csv", "is a folder, not a file"),
        ("foreign.csv", "this file is not a workbench monitor log"),
        ("missing/monitor.csv", "no such folder for the log"),
    ],
)
def test_bad_log_paths_are_one_line(tmp_path, capsys, name, message):
    (tmp_path / "folder.csv").mkdir()
    (tmp_path / "foreign.csv").write_text("name,amount\nrent,800\n")
    assert main(["monitor", "--once", "--root", EMPTY, "--log", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert (tmp_path / "foreign.csv").read_text() == "name,amount\nrent,800\n"  # never appended to


def test_prometheus_text_parses_to_the_same_figures():
    sample = Sampler(EMPTY, tegrastats=AGX_LOG).sample()
    families = {family.name: family for family in text_string_to_metric_families(exposition_text(sample_metrics(sample)))}
    total = families["workbench_power_total_watts"].samples[0]
    assert total.value == pytest.approx(8.726)  # 2412 + 1607 + 4707 mW
    assert total.labels["source"].startswith("sum of VDD_GPU_SOC+VDD_CPU_CV+VIN_SYS_5V0")
    rails = {s.labels["rail"]: s.value for s in families["workbench_power_rail_watts"].samples}
    assert rails == {"VDD_GPU_SOC": pytest.approx(2.412), "VDD_CPU_CV": pytest.approx(1.607), "VIN_SYS_5V0": pytest.approx(4.707)}
    temps = {s.labels["sensor"]: s.value for s in families["workbench_temperature_celsius"].samples}
    assert temps["junction"] == 52.562
    loads = {s.labels["unit"]: s.value for s in families["workbench_load_percent"].samples}
    assert loads["nvenc"] == 79.0 and loads["vic"] == 36.0
    # No CPU clocks on this root: absent, never a 0, and the reason is a metric of its own.
    assert "workbench_cpu_clock_hertz" not in families
    reasons = {s.labels["what"]: s.labels["why"] for s in families["workbench_unavailable"].samples}
    assert reasons["clocks"] == "no cpufreq (no clocks exposed)"


def test_metrics_server_on_loopback_serves_the_newest_sample():
    server = MetricsServer(0)
    try:
        sampler = Sampler(EMPTY, tegrastats=AGX_LOG)
        sampler.sample()
        server.update(sampler.sample())  # the second line: 2412 + 1607 + 4607 = 8626 mW
        assert server.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(server.url, timeout=30) as response:
            text = response.read().decode()
    finally:
        server.close()
    values = {f.name: f.samples[0].value for f in text_string_to_metric_families(text) if f.samples}
    assert values["workbench_power_total_watts"] == pytest.approx(8.626)


def test_metrics_on_another_address_need_an_explicit_flag(capsys):
    with pytest.raises(WorkbenchError, match="lets other machines read them"):
        MetricsServer(0, "0.0.0.0")
    assert main(["monitor", "--once", "--root", EMPTY, "--prometheus", "0", "--prometheus-host", "0.0.0.0"]) == 2
    assert "add --allow-remote" in capsys.readouterr().err
    assert main(["monitor", "--once", "--root", EMPTY, "--prometheus", "70000"]) == 2


def test_monitor_command_serves_prometheus_until_stopped(tmp_path):
    # The real command in its own process: it prints where the metrics are, serves them, stops on Ctrl-C.
    code = "import sys; from workbench.cli.main import main; sys.exit(main(sys.argv[1:]))"
    args = ["monitor", "--interval", "0.2", "--root", str(TREES / "jetson-orin-nano"), "--prometheus", "0", "--quiet"]
    process = subprocess.Popen([sys.executable, "-c", code, *args], stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = process.stderr.readline()
        assert "Prometheus metrics on http://127.0.0.1:" in line, line
        url = line.split(" on ", 1)[1].strip()
        deadline = time.monotonic() + 60
        while True:
            with urllib.request.urlopen(url, timeout=30) as response:
                families = {f.name: f for f in text_string_to_metric_families(response.read().decode())}
            if "workbench_power_total_watts" in families or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # the first sample is taken after a short window for CPU load
        total = families["workbench_power_total_watts"].samples[0]
        assert total.labels["source"] == "VDD_IN (ina3221 hwmon1)"
        hwmon = TREES / "jetson-orin-nano/sys/class/hwmon/hwmon1"
        millivolts, milliamps = int((hwmon / "in1_input").read_text()), int((hwmon / "curr1_input").read_text())
        assert total.value == pytest.approx(millivolts * milliamps / 1e6)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            assert process.wait(timeout=60) == 0
        finally:
            if process.poll() is None:  # Ctrl-C did not stop it: the test fails and leaves no monitor running
                process.kill()
                process.wait()
            process.stderr.close()


def test_a_text_cell_a_spreadsheet_would_run_is_written_as_text():
    # Names in reasons come from drivers and devices; this hostile one is written here by hand.
    from workbench.core.telemetry.sample import TelemetrySample, Unavailable
    from workbench.core.telemetry.sample_log import csv_cells

    sample = TelemetrySample(timestamp=1.0, mem_total_bytes=1, mem_available_bytes=1, swap_total_bytes=0,
                             swap_used_bytes=0, cpu_percent=(), unavailable=(Unavailable('=HYPERLINK("x")', "why"),))
    assert csv_cells(sample)["unavailable"] == "'=HYPERLINK(\"x\"): why"
    assert csv_cells(sample)["memory_total_bytes source"] == "source=psutil"  # ordinary text stays as it is
