"""Memory ledger panel: the budget, a stacked bar of where it goes, predicted vs reported vs measured."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from workbench.core.ledger.split_types import SplitLedger
from workbench.core.ledger.types import DOES_NOT_FIT, TIGHT, Ledger
from workbench.core.rpc.node_memory import LocalNodeMemory
from workbench.core.units import UNAVAILABLE, mib, mib_number, size
from workbench.ui.panel_views import LedgerView
from workbench.ui.widgets.colours import legend as swatch_legend
from workbench.ui.widgets.colours import theme_colour

CATEGORIES = (("weights", "weights"), ("kv", "KV cache"), ("compute", "compute"), ("overhead", "overhead"))


def split_decode_line(split: SplitLedger) -> str:
    """The split's decode at empty context: the speed model's prediction (or why none) beside the bound."""
    rate, bound = split.rate_empty, split.decode_empty.tokens_per_s
    if rate is not None and rate.tokens_per_s is not None:
        predicted = f"{rate.tokens_per_s:,.1f} tok/s predicted"
    else:
        why = ", ".join(rate.missing) if rate is not None and rate.missing else "no speed figures for the host"
        predicted = f"predicted {UNAVAILABLE} ({why})"
    return (f"split decode, empty context: {predicted}; bound "
            + (f"{bound:,.1f} tok/s" if bound is not None else UNAVAILABLE))


class LedgerPanel(Widget):
    """Attributes down: the panel grid sets `view`, one frozen LedgerView; the panel redraws from it."""

    BORDER_TITLE = "Memory ledger"

    view: reactive[LedgerView] = reactive(LedgerView())

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._node_memory = LocalNodeMemory()

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh())

    def render(self) -> RenderableType:
        ledger = self.view.ledger
        if ledger is None:
            return Text("No prediction yet: choose a model, a preset and a device.", style="italic")
        width = max(10, self.content_region.width or 40)
        parts: list[RenderableType] = [self._budget_table(ledger), self._stacked_bar(ledger, width),
                                       self._legend(ledger), self._comparison_table(ledger)]
        split = self.view.split
        if split is not None and len(split.devices) > 1:
            parts.append(self._devices_table(split))
            parts.append(Text(split_decode_line(split)))
        parts.append(self._system_memory())
        if ledger.unverified:  # the compute and overhead lines were checked on another llama.cpp build
            parts.append(Text(f"⚠ {ledger.unverified}", style=theme_colour(self.app, "ledger-compute")))
        return Group(*parts)

    def _devices_table(self, split: SplitLedger) -> Table:
        """One column group per device: predicted, llama.cpp's report, and measured where it can be."""
        table = Table(expand=True, box=None, padding=(0, 0, 0, 1), show_edge=False, header_style="bold",
                      title=f"per device · {split.verdict}", title_justify="left", title_style="bold")
        table.add_column("MiB", no_wrap=True)
        loaded = self.view.loaded
        reported = {(d.name, d.endpoint): d for d in loaded.devices} if loaded else {}
        for device in split.devices:
            for column in ("pred", "cpp", "meas"):
                table.add_column(f"{device.name}\n{column}", justify="right", no_wrap=True)
        rows = {"weights": [], "KV": [], "compute": [], "total": []}
        for device in split.devices:
            report = reported.get((device.name, device.endpoint))
            measured = self._device_measured(device)
            for label, predicted, got in (
                ("weights", device.weights_bytes, report.model_bytes if report else None),
                ("KV", device.kv_bytes, report.kv_bytes if report else None),
                ("compute", device.compute_bytes, report.compute_bytes if report else None),
                ("total", device.total_bytes, report.total_bytes if report else None),
            ):
                rows[label] += [mib_number(predicted), mib_number(got), mib_number(measured) if label == "total" else "—"]
        for label, cells in rows.items():
            table.add_row(Text(label, style="bold" if label == "total" else ""), *cells)
        budgets = []
        for device in split.devices:
            budgets += [mib_number(device.budget_bytes), "", Text(device.verdict, style=self._verdict_style(device.verdict))]
        table.add_row("budget", *budgets)
        return table

    def _device_measured(self, device) -> int | None:
        if not device.endpoint:
            return self._engine_rss() if device.name == "CPU" else None
        return self._node_memory.rss_bytes(device.endpoint)

    def _verdict_style(self, verdict: str) -> str:
        colour = {DOES_NOT_FIT: "ledger-over", TIGHT: "ledger-compute"}.get(verdict, "ledger-headroom")
        return theme_colour(self.app, colour)

    def _budget_table(self, ledger: Ledger) -> Table:
        table = Table.grid(padding=(0, 1), expand=True)
        table.add_column(ratio=1)
        table.add_column(justify="right")
        table.add_row(Text(f"device {ledger.device}", style="bold"), mib(ledger.ram_total_bytes))
        for name, n_bytes in ledger.reserves_bytes:
            table.add_row(f"  − reserve {name.replace('_', ' ')}", mib(n_bytes))
        table.add_row(Text("left for the LLM", style="bold"), Text(mib(ledger.budget_bytes), style="bold"))
        return table

    def _stacked_bar(self, ledger: Ledger, width: int) -> Text:
        amounts = [(key, getattr(ledger, f"{key}_bytes")) for key, _ in CATEGORIES]
        scale_to = max(ledger.budget_bytes, ledger.total_bytes, 1)
        bar = Text()
        used = 0
        for key, n_bytes in amounts:
            cells = round(n_bytes / scale_to * width)
            cells = max(cells, 1) if n_bytes > 0 else 0
            cells = min(cells, width - used)
            bar.append("█" * cells, style=theme_colour(self.app, f"ledger-{key}"))
            used += cells
        rest = width - used
        if ledger.headroom_bytes >= 0:
            bar.append("░" * rest, style=theme_colour(self.app, "ledger-headroom"))
        else:
            # over budget: the part of the bar past the budget is redrawn in the warning colour
            budget_cells = round(ledger.budget_bytes / scale_to * width)
            plain = bar.plain
            bar = bar[:budget_cells]
            bar.append(plain[budget_cells:], style=f"bold {theme_colour(self.app, 'ledger-over')}")
        return bar

    def _legend(self, ledger: Ledger) -> Text:
        # broken between pairs, never inside one (Rich would break at a no-break space too)
        return swatch_legend([(theme_colour(self.app, f"ledger-{key}"), label)
                              for key, label in (*CATEGORIES, ("headroom", "headroom"))],
                             self.content_region.width or 40)

    def _comparison_table(self, ledger: Ledger) -> Table:
        loaded = self.view.loaded
        table = Table(expand=True, box=None, padding=(0, 0, 0, 1), show_edge=False, header_style="bold")
        table.add_column("MiB", no_wrap=True, min_width=10)
        for header in ("predicted", "llama.cpp", "measured"):
            table.add_column(header, justify="right", no_wrap=True)
        reported = {
            "weights": loaded.model_buffer_bytes if loaded else None,
            "kv": loaded.kv_buffer_bytes + loaded.rs_buffer_bytes if loaded else None,  # KV and recurrent state
            "compute": loaded.compute_buffer_bytes if loaded else None,
        }
        for key, label in CATEGORIES:
            swatch = Text("■ ", style=theme_colour(self.app, f"ledger-{key}")) + Text(label)
            predicted = getattr(ledger, f"{key}_bytes")
            if key == "weights":  # llama.cpp reports its CPU_REPACK copy among the model buffers
                predicted += ledger.cpu_repack_bytes
            if key == "kv":  # a hybrid model's recurrent state beside its KV cache (ledger/recurrent.py)
                predicted += ledger.rs_bytes
            table.add_row(swatch, mib_number(predicted), mib_number(reported.get(key)), "—")
        rss = self._engine_rss()
        reported_total = sum(v for v in reported.values() if v) if loaded else None
        table.add_row(Text("total", style="bold"), Text(mib_number(ledger.total_bytes), style="bold"),
                      mib_number(reported_total), Text(mib_number(rss), style="bold"))
        headroom_colour = {DOES_NOT_FIT: "ledger-over", TIGHT: "ledger-compute"}.get(ledger.verdict, "ledger-headroom")
        headroom_style = f"bold {theme_colour(self.app, headroom_colour)}"
        measured_headroom = mib_number(ledger.budget_bytes - rss) if rss else "—"
        table.add_row("headroom", Text(mib_number(ledger.headroom_bytes), style=headroom_style), "", measured_headroom)
        resident = ledger.resident
        if resident is not None:  # what RSS should show: after load, and once a prompt filled the context
            table.add_row("RSS at load", mib_number(resident.after_load_bytes), "",
                          mib_number(loaded.rss_bytes if loaded else None))
            table.add_row("RSS full ctx", mib_number(resident.after_prompt_bytes), "", mib_number(rss) if loaded else "—")
        return table

    def _engine_rss(self) -> int | None:
        sample, loaded = self.view.sample, self.view.loaded
        if sample is not None and sample.engine_rss_bytes:
            return sample.engine_rss_bytes
        return loaded.rss_bytes if loaded else None

    def _system_memory(self) -> Text:
        sample = self.view.sample
        if sample is None:
            return Text(f"system memory: {UNAVAILABLE} (no telemetry sample yet)", style="dim")
        text = Text(f"system free {size(sample.mem_available_bytes)} of {size(sample.mem_total_bytes)}"
                    f" · swap {size(sample.swap_used_bytes)} of {size(sample.swap_total_bytes)}")
        if sample.swap_used_bytes > 0:
            text.append(f"\n⚠ swap in use ({size(sample.swap_used_bytes)}): decode will crawl and the OOM "
                        "killer is near", style=f"bold {theme_colour(self.app, 'ledger-over')}")
        return text
