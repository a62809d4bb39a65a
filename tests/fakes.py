"""A deterministic engine and telemetry sampler with the real interfaces, for UI tests; the waits of every test."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

from workbench.core.engine.events import (
    ChatMessage,
    ContextShifted,
    EngineFailed,
    Loaded,
    LoadProgressed,
    PrefillProgressed,
    Sampling,
    TokenChunk,
    TurnFinished,
)
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.telemetry.sample import Clock, PowerRail, TelemetrySample, Temperature, Throttle, Unavailable

SCRIPTED_ANSWER = ("The ", "ledger ", "says ", "it ", "**fits**", ": ", "weights ", "and ", "KV ", "cache ",
                   "stay ", "under ", "the ", "budget", ".")
MIB = 2**20


class FakeEngine:
    """EngineClient's interface with scripted events; timestamps are fixed so charts repeat."""

    def __init__(self, answer: Sequence[str] = SCRIPTED_ANSWER, *, token_delay_s: float = 0.0,
                 n_ctx: int = 2048, fail_load: str = "", shift_on_turn: int = 0, prefill_tokens: int = 0,
                 prefill_gate: threading.Event | None = None) -> None:
        self.answer = tuple(answer)
        self.token_delay_s = token_delay_s
        self.n_ctx = n_ctx
        self.fail_load = fail_load  # a message: the next load ends in EngineFailed(kind="load")
        self.shift_on_turn = shift_on_turn  # 1-based turn that reports a context shift
        self.prefill_tokens = prefill_tokens  # > 0: each turn reports reading that many prompt tokens
        self.prefill_gate = prefill_gate  # set by the test: the prefill halts halfway until then
        self.crash_next_chat = False
        self.pid: int | None = None
        self.alive = False
        self.loaded: Loaded | None = None
        self.calls: list[str] = []
        self.chats: list[tuple[tuple[ChatMessage, ...], Sampling]] = []
        self.load_options: list[dict] = []
        self._cancel = threading.Event()
        self._turns = 0
        self._cells = 0

    def start(self) -> None:
        self.calls.append("start")
        self.alive, self.pid = True, 424242

    def load(self, model_path, preset: Preset, *, device: DeviceProfile | None = None,
             allow_overbudget: bool = False) -> Iterator[object]:
        self.calls.append("load")
        self.load_options.append({"model_path": str(model_path), "preset": preset.name,
                                  "allow_overbudget": allow_overbudget})
        if not self.alive:
            self.start()
        for fraction in (0.0, 0.5, 1.0):
            yield LoadProgressed("loading", fraction)
        if self.fail_load:
            yield EngineFailed(kind="load", message=self.fail_load, log_tail=("llama_model_load: error",))
            return
        self._cells = 0
        self.loaded = Loaded(
            model_path=str(model_path), preset_name=preset.name, n_ctx=self.n_ctx, n_ctx_train=8192,
            model_buffer_bytes=int(94.3 * MIB), kv_buffer_bytes=int(45.0 * MIB),
            compute_buffer_bytes=int(66.5 * MIB), load_seconds=0.42, rss_bytes=int(231.0 * MIB),
            uss_bytes=int(190.0 * MIB), pid=self.pid or 0,
        )
        yield self.loaded

    def chat(self, messages: Sequence[ChatMessage], sampling: Sampling) -> Iterator[object]:
        self.calls.append("chat")
        self.chats.append((tuple(messages), sampling))
        self._cancel.clear()
        self._turns += 1
        base = 1000.0 + 20.0 * self._turns  # fixed engine clock: the speed chart is repeatable
        if self.crash_next_chat:
            self.crash_next_chat = False
            yield TokenChunk(self.answer[0], 1, base + 0.1)
            self.alive, self.loaded = False, None
            yield EngineFailed(kind="crash", message="engine process died", exit_signal="SIGKILL",
                               exit_code=-9, log_tail=("llama_decode: decoding batch", "killed"),
                               prediction="predicted total 206 MiB of a 20,000 MiB budget")
            return
        if self.shift_on_turn == self._turns:
            yield ContextShifted(turns_dropped=1, tokens_dropped=64)
        if self.prefill_tokens:
            yield PrefillProgressed(0, self.prefill_tokens)
            yield PrefillProgressed(self.prefill_tokens // 2, self.prefill_tokens)
            if self.prefill_gate is not None:
                self.prefill_gate.wait(30)
            yield PrefillProgressed(self.prefill_tokens, self.prefill_tokens)
        prompt_tokens = 40 + 12 * len(messages)
        reused = self._cells if self._turns > 1 else 0
        text, stop, generated = [], "stop", 0
        for index, piece in enumerate(self.answer):
            if self._cancel.is_set():
                stop = "cancelled"
                break
            if generated >= sampling.max_tokens:
                stop = "length"
                break
            if self.token_delay_s:
                time.sleep(self.token_delay_s)
            text.append(piece)
            generated += 1
            yield TokenChunk(piece, 1, base + 0.12 + 0.025 * index)
        self._cells = min(self.n_ctx, prompt_tokens + generated)
        yield TurnFinished(
            text="".join(text), stop_reason=stop, prompt_tokens=prompt_tokens, reused_tokens=min(reused, prompt_tokens),
            generated_tokens=generated, ttft_s=0.12, prefill_tps=850.0, decode_tps=40.0, kv_cells_used=self._cells,
            n_ctx=self.n_ctx, context_shifts=1 if self.shift_on_turn == self._turns else 0,
            started_at=base, finished_at=base + 0.12 + 0.025 * generated,
        )

    def cancel(self) -> None:
        self.calls.append("cancel")
        self._cancel.set()

    def unload(self) -> None:
        self.calls.append("unload")
        self.loaded = None

    def close(self) -> None:
        self.calls.append("close")
        self.alive, self.loaded = False, None


class FakeSampler:
    """Fixed telemetry: an x86 box with two sensors and RAPL, or one exposing no sensor at all."""

    def __init__(self, engine_pid: int | None = None, *, sensors: bool = True, swap_used_bytes: int = 0) -> None:
        self.engine_pid = engine_pid
        self.sensors = sensors
        self.swap_used_bytes = swap_used_bytes
        self.count = 0

    def sample(self) -> TelemetrySample:
        self.count += 1
        step = self.count % 8  # a repeating ramp: sparklines have a shape but stay deterministic
        common = dict(
            timestamp=float(self.count) / 2,
            mem_total_bytes=16 * 1024 * MIB, mem_available_bytes=11 * 1024 * MIB,
            swap_total_bytes=2048 * MIB, swap_used_bytes=self.swap_used_bytes,
            cpu_percent=(35.0, 60.0),
            engine_rss_bytes=int(233.0 * MIB) if self.engine_pid else None,
            engine_uss_bytes=int(191.0 * MIB) if self.engine_pid else None,
        )
        if not self.sensors:
            return TelemetrySample(**common, unavailable=(
                Unavailable("temperature", "no thermal sensors exposed"),
                Unavailable("clocks", "no cpufreq policies exposed"),
                Unavailable("power", "no power source exposed"),
                Unavailable("throttle", "no throttle counters exposed"),
            ))
        return TelemetrySample(
            **common,
            temperatures=(
                Temperature("cpu", 52.0 + step, "/sys/class/hwmon/hwmon2/temp1_input", trip_critical_c=100.0),
                Temperature("nvme", 38.0 + step / 2, "/sys/class/hwmon/hwmon1/temp1_input"),
            ),
            clocks=(Clock("policy0", "0-1", 2_400_000 - step * 100_000, 3_000_000, 3_600_000, "powersave"),),
            power=(PowerRail("package-0", 7.5 + step / 4, "/sys/class/powercap/intel-rapl:0/energy_uj"),),
            total_power_w=7.5 + step / 4,
            energy_j=10.0 * self.count,
            throttle=Throttle(False, "", "/sys/devices/system/cpu/cpu0/thermal_throttle/package_throttle_count"),
        )


# ---- small host apps for widget tests ---------------------------------------------------------


def panel_host(*widgets):
    """An app that shows `widgets` with the shipped themes registered (workbench-dark active)."""
    from textual.app import App

    from workbench.ui.themes import APP_COLOUR_DEFAULTS, DEFAULT_THEME, load_themes

    class PanelHost(App):
        CSS = ".panel { height: 1fr; }"

        def __init__(self) -> None:
            super().__init__()
            for theme in load_themes():
                self.register_theme(theme)
            self.theme = DEFAULT_THEME

        def get_theme_variable_defaults(self) -> dict[str, str]:
            return dict(APP_COLOUR_DEFAULTS)

        def compose(self):
            yield from widgets

    return PanelHost()


def rendered(widget):
    """What a widget draws (a Static's content), as plain text."""
    import io

    from rich.console import Console

    from textual.widgets import Static

    console = Console(width=max(20, widget.content_region.width), file=io.StringIO(), record=True,
                      color_system="truecolor")
    console.print(widget.content if isinstance(widget, Static) else widget.render())
    return console.export_text()


def styles_of(widget, needle: str) -> set[str]:
    """The colours (as #rrggbb) of every segment of the rendered widget containing `needle`."""
    import io

    from rich.console import Console

    console = Console(width=max(20, widget.content_region.width), file=io.StringIO(), color_system="truecolor")
    colours = set()
    for segment in console.render(widget.render()):
        if needle in segment.text and segment.style and segment.style.color and segment.style.color.triplet:
            colours.add(segment.style.color.triplet.hex)
    return colours


# ---- the whole app with fakes -----------------------------------------------------------------


def make_app(engines: list | None = None, *, engine_kwargs: dict | None = None, sensors: bool = True,
             preset: str = "as-is", device: str = "host", model=None, telemetry_interval_s: float = 0.2,
             token_batch_interval_s: float = 0.05, theme_name: str | None = None):
    """The real app on the bundled model with a FakeEngine per engine start (kept in `engines`)."""
    from workbench.core.paths import bundled_model_path
    from workbench.ui.app import WorkbenchApp
    from workbench.ui.selection import Selection

    engines = engines if engines is not None else []

    def engine_factory():
        engines.append(FakeEngine(**(engine_kwargs or {})))
        return engines[-1]

    selection = Selection(model_path=model or bundled_model_path(), preset_name=preset, device_name=device)
    selection.add_model(selection.model_path, f"{selection.model_path.stem} (bundled)")
    return WorkbenchApp(selection, engine_factory=engine_factory,
                        sampler_factory=lambda pid: FakeSampler(pid, sensors=sensors),
                        telemetry_interval_s=telemetry_interval_s, token_batch_interval_s=token_batch_interval_s,
                        theme_name=theme_name)


# ---- waiting for what another thread or process does ------------------------------------------
# The deadlines are liveness bounds for a broken build, not speed checks: a loaded 2-core CI
# machine can starve a worker thread for seconds, and a condition that holds returns at once.


def _what(condition, what: str | None) -> str:
    return what or getattr(condition, "__name__", repr(condition))


async def wait_until(pilot, condition, timeout_s: float = 60.0, *, what: str | None = None) -> None:
    """Let the app run until `condition()` holds (workers are threads: their messages take a moment)."""
    import time

    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {_what(condition, what)}")
        await pilot.pause(0.02)


def wait_for(condition, timeout_s: float = 120.0, *, what: str | None = None):
    """Poll `condition()` until it gives something true, and return that (a thread, a server, a process)."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {_what(condition, what)}")
        time.sleep(0.05)


# ---- a worker's thread that ends late ------------------------------------------------------------
# A thread worker that a later one cancels runs on and posts when it ends. These hold one such thread
# until the later request's answer is shown, then let it go and wait until what it posted was handled.


class Held:
    """`real` (a module's function a worker calls), but a call for which `when(*args)` holds waits in its
    thread until `release` is set; `held` is set once one does."""

    def __init__(self, real, when=lambda *args, **kwargs: True) -> None:
        self.real, self.when = real, when
        self.held, self.release = threading.Event(), threading.Event()

    @classmethod
    def patched(cls, monkeypatch, module, name: str, when=lambda *args, **kwargs: True) -> Held:
        """`module.name` held so for the test."""
        held = cls(getattr(module, name), when)
        monkeypatch.setattr(module, name, held)
        return held

    def __call__(self, *args, **kwargs):
        if self.when(*args, **kwargs):
            self.held.set()
            self.release.wait(60)
        return self.real(*args, **kwargs)


async def handled(pilot, node, arrived: list) -> None:
    """Wait until every message `node` had received before now was handled: a marker posted to it after them
    arrives (in `arrived`, the run's message_hook list) only once its queue has reached it."""
    from textual.message import Message

    class Marker(Message):
        """Posted after the messages to wait for."""

    marker = Marker()
    node.post_message(marker)
    await wait_until(pilot, lambda: any(message is marker for message in arrived), what="the marker handled")
