"""A telemetry sample as named metric points (Prometheus names, labels, help); absent figures stay absent."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from workbench.core.config.loopback import is_loopback_host
from workbench.core.config.web_boundary import WebBoundary
from workbench.core.errors import WorkbenchError
from workbench.core.telemetry.sample import TelemetrySample

PREFIX = "workbench_"


@dataclass(frozen=True)
class MetricPoint:
    """One figure: `name` without the prefix' units ambiguity (base units in the name, as
    Prometheus asks: _bytes, _celsius, _hertz, _watts, _volts, _joules, _percent)."""

    name: str  # "workbench_temperature_celsius"
    labels: tuple[tuple[str, str], ...]  # (("sensor", "cpu"), ("source", "/sys/...")), same keys per name
    value: float
    help: str


def sample_metrics(sample: TelemetrySample) -> list[MetricPoint]:
    """Every figure of the sample with its source as a label. A figure with no source is not a
    point with value 0: it is absent, and `workbench_unavailable{what,why} 1` says why."""
    return list(_points(sample))


def _point(name: str, value: float, help_text: str, **labels: str) -> MetricPoint:
    return MetricPoint(PREFIX + name, tuple(labels.items()), float(value), help_text)


def _points(sample: TelemetrySample) -> Iterator[MetricPoint]:
    memory = sample.memory_source
    yield _point("memory_total_bytes", sample.mem_total_bytes, "Total RAM.", source=memory)
    yield _point("memory_available_bytes", sample.mem_available_bytes, "RAM available to new work.", source=memory)
    yield _point("swap_total_bytes", sample.swap_total_bytes, "Swap size.", source=memory)
    yield _point("swap_used_bytes", sample.swap_used_bytes, "Swap in use.", source=memory)
    for core, percent in enumerate(sample.cpu_percent):
        yield _point("cpu_load_percent", percent, "Load of one CPU core since the previous sample.",
                     core=str(core), source=memory)
    if sample.engine_rss_bytes is not None:
        yield _point("engine_rss_bytes", sample.engine_rss_bytes, "Resident memory of the engine process.",
                     source="psutil")
    if sample.engine_uss_bytes is not None:
        yield _point("engine_uss_bytes", sample.engine_uss_bytes, "Memory only the engine process holds (USS).",
                     source="psutil")
    for temp in sample.temperatures:
        labels = {"sensor": temp.name, "label": temp.label, "source": temp.source}
        yield _point("temperature_celsius", temp.celsius, "Sensor temperature.", **labels)
        if temp.trip_critical_c is not None:
            yield _point("temperature_critical_celsius", temp.trip_critical_c,
                         "The sensor's critical trip point.", **labels)
        if temp.trip_passive_c is not None:
            yield _point("temperature_passive_celsius", temp.trip_passive_c,
                         "The sensor's passive (throttling) trip point, or hwmon max.", **labels)
    for clock in sample.clocks:
        labels = {"policy": clock.policy, "cpus": clock.cpus, "governor": clock.governor}
        yield _point("cpu_clock_hertz", clock.cur_khz * 1000, "Current CPU clock (cpufreq scaling_cur_freq).",
                     **labels)
        yield _point("cpu_clock_cap_hertz", clock.max_khz * 1000, "CPU clock cap in force (scaling_max_freq).",
                     **labels)
        yield _point("cpu_clock_max_hertz", clock.hw_max_khz * 1000, "Hardware maximum clock (cpuinfo_max_freq).",
                     **labels)
    for rail in sample.power:
        yield _point("power_rail_watts", rail.watts, "Power of one rail.", rail=rail.name, source=rail.source)
        if rail.volts is not None:
            yield _point("power_rail_volts", rail.volts, "Bus voltage of one rail.", rail=rail.name,
                         source=rail.source)
    if sample.total_power_w is not None:
        yield _point("power_total_watts", sample.total_power_w, "Total power: the input rail, RAPL or battery.",
                     source=sample.total_power_source)
    if sample.energy_j is not None:
        yield _point("energy_joules", sample.energy_j, "Energy since the sampler started (monotonic).",
                     source=sample.energy_source)
    if sample.throttle is not None:
        throttle = sample.throttle
        yield _point("throttled", 1 if throttle.active else 0, "1 while throttling now, with the cause.",
                     cause=throttle.cause, history=throttle.history, source=throttle.source)
    for unit, percent in sample.loads:
        yield _point("load_percent", percent, "Load of an accelerator or the memory controller.", unit=unit,
                     source=_unit_source(sample, unit))
    for unit, mhz in sample.device_clocks_mhz:
        yield _point("device_clock_hertz", mhz * 1e6, "Clock of a GPU, NPU, memory controller or codec engine.",
                     unit=unit, source=_unit_source(sample, unit))
    for item in sample.unavailable:
        yield _point("unavailable", 1, "A figure this machine does not give, and why (never reported as 0).",
                     what=item.what, why=item.why)


def _unit_source(sample: TelemetrySample, unit: str) -> str:
    return dict(sample.unit_sources).get(unit, "")


def metric_families(points: Iterable[MetricPoint]) -> dict[str, list[MetricPoint]]:
    """Points grouped by name, in first-seen order (one `# HELP`/`# TYPE` block each)."""
    families: dict[str, list[MetricPoint]] = {}
    for point in points:
        families.setdefault(point.name, []).append(point)
    return families


class SampleCollector:
    """A prometheus_client collector that exposes the newest sample given to `update()`."""

    def __init__(self) -> None:
        self._points: list[MetricPoint] = []

    def update(self, sample: TelemetrySample) -> None:
        self._points = sample_metrics(sample)  # one assignment: the scrape thread sees old or new

    def collect(self) -> Iterator[object]:
        from prometheus_client.core import GaugeMetricFamily  # deferred: importing prometheus_client costs start-up time

        for name, points in metric_families(self._points).items():
            label_names = [key for key, _ in points[0].labels]
            family = GaugeMetricFamily(name, points[0].help, labels=label_names)
            for point in points:
                family.add_metric([value for _, value in point.labels], point.value)
            yield family


def exposition_text(points: Iterable[MetricPoint]) -> str:
    """The Prometheus text exposition (format 0.0.4) of `points`, via prometheus_client."""
    from prometheus_client import (  # deferred: importing prometheus_client costs start-up time
        CollectorRegistry,
        generate_latest,
    )

    collector = SampleCollector()
    collector._points = list(points)
    registry = CollectorRegistry()
    registry.register(collector)  # type: ignore[arg-type]
    return generate_latest(registry).decode("utf-8")


class MetricsServer:
    """Prometheus metrics of the newest sample over HTTP (prometheus_client's server, its own thread).

    Loopback unless the caller explicitly allows another address: the figures name the machine's
    sensors and processes, and the endpoint has no authentication.
    """

    def __init__(self, port: int, host: str = "127.0.0.1", *, allow_remote: bool = False,
                 allow_hosts: tuple[str, ...] = ()) -> None:
        from prometheus_client import (  # deferred: importing prometheus_client costs start-up time
            CollectorRegistry,
        )

        from workbench.core.telemetry.metrics_http import (  # deferred: importing prometheus_client and http.server costs start-up time
            start_metrics_server,
        )

        if not 0 <= port <= 65535:
            raise WorkbenchError(f"port {port} is not a TCP port", fix="give a port from 1 to 65535, e.g. 9101")
        if not is_loopback_host(host) and not allow_remote:
            raise WorkbenchError(f"serving metrics on {host} lets other machines read them (no authentication)",
                                 fix="add --allow-remote to mean it, or leave out --prometheus-host (127.0.0.1)")
        self.collector = SampleCollector()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.collector)  # type: ignore[arg-type]
        try:
            # Host and Origin checked as the API checks them: a page using DNS rebinding gets 421
            boundary = WebBoundary.serving(host, extra_names=allow_hosts)
            self._server, self._thread = start_metrics_server(registry, host, port, boundary)
        except OSError as error:
            raise WorkbenchError(f"cannot serve metrics on {host}:{port} ({error.strerror})",
                                 fix="choose another --prometheus port") from error
        self.host = host
        self.port = int(self._server.server_port)
        self.remote = not is_loopback_host(host)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def update(self, sample: TelemetrySample) -> None:
        self.collector.update(sample)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
