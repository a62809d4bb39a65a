"""The Serve screen: a switch that serves the loaded model over the OpenAI-compatible API, and its panels."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Label, Static, Switch

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.errors import WorkbenchError
from workbench.core.serve.engine_host import AttachedEngine, ServingEngine
from workbench.core.serve.listen import listen
from workbench.core.serve.server_thread import ApiServerThread
from workbench.ui.engine_session import Engine
from workbench.ui.widgets.kv_panel import SlotsKvPanel
from workbench.ui.widgets.serving_panel import ServingPanel

STATUS_INTERVAL_S = 0.5


class ServeController:
    """Starts and stops the API server over an engine the app owns; a test can drive it without a screen.

    With the loaded `preset` (and `device`) given, the host is `workbench api`'s own ServingEngine on the
    app's engine: a crash restarts the engine with the same model and preset (503 meanwhile), and /metrics
    carries the board's telemetry from `sampler_factory(engine_pid)`, as cmd_api serves them.
    """

    def __init__(self, engine: Engine | None, preset: Preset | None = None, device: DeviceProfile | None = None,
                 *, allow_overbudget: bool = False, sampler_factory: Any = None) -> None:
        self._engine = engine
        self._restart_with = (preset, device, allow_overbudget)
        self._sampler_factory = sampler_factory
        self.host: Any = None
        self.server: Any = None
        self.sampler: Any = None
        self._taking = threading.Lock()  # stop() takes what serves in one step

    @property
    def restart_preset(self) -> Preset | None:
        """The preset a crashed engine is loaded with again (None: no restart, the server stops)."""
        return self._restart_with[0]

    @property
    def serving(self) -> bool:
        return self.server is not None

    def start(self, n_slots: int, port: int, queue: int = 16) -> str:
        """Open the slots and serve on 127.0.0.1:port; the address, or WorkbenchError (one line)."""
        from workbench.core.serve.app import (  # deferred: the ASGI stack, when serving starts
            ServerConfig,
            create_app,
        )

        if self._engine is None or self._engine.loaded is None:
            raise WorkbenchError("no model is loaded to serve", fix="Load a model on the main screen first")
        listener = listen("127.0.0.1", port)
        preset, device, allow_overbudget = self._restart_with
        model_path = self._engine.loaded.model_path
        host = (ServingEngine(model_path, preset, n_slots, device=device, allow_overbudget=allow_overbudget,
                              client=self._engine) if preset is not None else AttachedEngine(self._engine, n_slots))
        try:
            host.start()
        except Exception:
            listener.close()
            raise
        name = model_path.rsplit("/", 1)[-1].removesuffix(".gguf")
        sampler = None
        try:
            sampler = self._sampler_factory(host.pid) if self._sampler_factory is not None else None
            app = create_app(host, ServerConfig(name, None, queue), telemetry=sampler)
            server = ApiServerThread(app, listener, host=host)
            server.start()
        except Exception:  # the engine's slots and the port go back: the chat must not wait on a server that never ran
            if sampler is not None:
                sampler.close()
            host.close()
            listener.close()
            raise
        with self._taking:
            self.host, self.server, self.sampler = host, server, sampler
        return server.address

    def stop(self) -> str:
        """Stop serving: open requests answer 503 first; why the engine had to be killed ("" when it was not).
        Safe from two threads at once (a screen left while its start ends): one of them stops."""
        with self._taking:
            server, host = self.server, self.host
            self.server = self.host = None
            sampler, self.sampler = self.sampler, None
        killed = ""
        if server is not None:
            server.stop()
            killed = server.killed
        if host is not None:
            host.close()
        if sampler is not None:
            sampler.close()
        return killed


class ServeScreen(Screen):
    """Serve switch, slots and port, the serving panel and each slot's KV cells; leaving the screen stops serving."""

    CSS_PATH = "serve_screen.tcss"
    BINDINGS = [Binding("escape", "app.pop_screen", "Back")]

    @dataclass
    class Started(Message):
        address: str
        serving_with: tuple[int, int]  # (slots, port) as asked

    @dataclass
    class StartFailed(Message):
        error: str

    @dataclass
    class Stopped(Message):
        killed: str  # why the engine had to be killed ("" when it was not)

    def __init__(self, engine: Engine | None, kv_bytes_per_token: int = 0, cache_types: str = "",
                 controller: ServeController | None = None) -> None:
        super().__init__()
        self.controller = controller or ServeController(engine)
        self._kv_look = (kv_bytes_per_token, cache_types)  # as the main KV panel shows the loaded cache
        self._wanted: tuple[int, int] | None = None  # (slots, port) the switch asks for; None: off
        self._serving_with: tuple[int, int] | None = None  # what serves now
        self._busy = False  # a start or stop runs
        self._left = False  # unmounted: a start that ends now stops at once

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="serve-controls"):
            yield Label("Serve the loaded model")
            yield Switch(id="serve-switch")
            yield Label("slots")
            yield Input("4", id="serve-slots", type="integer", max_length=2)
            yield Label("port")
            yield Input("8080", id="serve-port", type="integer", max_length=5)
        yield Static("", id="serve-message", markup=False)
        with Horizontal(id="serve-panels"):
            yield ServingPanel(id="serving-panel", classes="panel")
            yield SlotsKvPanel(id="serve-kv", classes="panel")
        yield Footer()

    def on_mount(self) -> None:
        kv = self.query_one(SlotsKvPanel)
        kv.bytes_per_token, kv.cache_types = self._kv_look[0], self._kv_look[1] or kv.cache_types
        self.set_interval(STATUS_INTERVAL_S, self._show_status)
        self.query_one("#serve-switch", Switch).focus()  # Space serves at once; Tab reaches slots and port

    @on(Switch.Changed, "#serve-switch")
    def _switched(self, event: Switch.Changed) -> None:
        if not event.value:
            self._wanted = None
        else:
            try:
                slots = int(self.query_one("#serve-slots", Input).value or "0")
                port = int(self.query_one("#serve-port", Input).value or "-1")
            except ValueError:
                slots, port = 0, -1
            if not (1 <= slots <= 64 and 0 <= port <= 65535):
                self._say("slots must be 1 to 64 and the port 0 to 65535")
                self._switch_off()
                return
            self._wanted = (slots, port)
        self._settle()

    def _settle(self) -> None:
        """One start or stop at a time, towards the switch's latest state: a switch flipped while one runs
        is acted on once it ends."""
        if self._busy or self._wanted == self._serving_with:
            return
        self._busy = True
        if self._serving_with is not None:
            self._stop()
        else:
            self._start(*self._wanted)

    @work(thread=True, group="serve")
    def _start(self, slots: int, port: int) -> None:
        try:
            address = self.controller.start(slots, port)
        except Exception as error:  # noqa: BLE001 - one line on the screen; the app keeps running
            self.post_message(self.StartFailed(str(error)))
            return
        if self._left:  # the screen was left while serving started: nothing would stop it
            self.controller.stop()
            return
        self.post_message(self.Started(address, (slots, port)))

    @work(thread=True, group="serve")
    def _stop(self) -> None:
        self.post_message(self.Stopped(self.controller.stop()))

    def on_serve_screen_started(self, message: Started) -> None:
        self._busy, self._serving_with = False, message.serving_with
        panel = self.query_one(ServingPanel)
        panel.address, panel.state = message.address, "ready"
        opened = self.controller.host.opened if self.controller.host is not None else None
        slots = (f"{opened.n_slots} slots x {opened.slot_ctx:,} tokens of the {opened.n_ctx:,}-token context "
                 f"(one KV cache, kv_unified)" if opened is not None else "")
        self._say(f"serving on {message.address} — this machine only; {slots}; the chat waits until serving stops")
        self._settle()

    def on_serve_screen_start_failed(self, message: StartFailed) -> None:
        self._busy, self._wanted = False, None
        self._switch_off()
        self._say(message.error)

    def on_serve_screen_stopped(self, message: Stopped) -> None:
        self._busy, self._serving_with = False, None
        panel = self.query_one(ServingPanel)
        panel.address, panel.state, panel.status = "", "off", None
        kv = self.query_one(SlotsKvPanel)
        kv.n_ctx, kv.cells_used, kv.slot_cells = 0, 0, ()
        self._say(f"stopped serving; {message.killed}" if message.killed else "stopped serving")
        self._settle()

    def _switch_off(self) -> None:
        switch = self.query_one("#serve-switch", Switch)
        with switch.prevent(Switch.Changed):
            switch.value = False

    def _show_status(self) -> None:
        host = self.controller.host
        if host is None:
            return
        panel = self.query_one(ServingPanel)
        panel.state = host.state if host.state != "stopped" else f"stopped: {host.last_failure}"
        status = panel.status = host.status
        if status is not None:
            kv = self.query_one(SlotsKvPanel)
            kv.n_ctx, kv.cells_used, kv.slot_ctx = status.n_ctx, status.kv_cells_used, status.slot_ctx
            kv.slot_cells = tuple(slot.kv_cells for slot in status.slots)

    def _say(self, text: str) -> None:
        self.query_one("#serve-message", Static).update(text)

    def on_unmount(self) -> None:
        # A start still running sees _left once it returns and stops what it started (_start).
        self._left = True
        self.controller.stop()
