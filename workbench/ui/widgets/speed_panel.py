"""Tokens/sec panel: decode rate over time against the device's bandwidth bound, per-turn figures and the speed model's prediction."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.color import Color
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from workbench.core.engine.events import TurnFinished
from workbench.core.ledger.types import SpeedPrediction
from workbench.core.units import rate, seconds
from workbench.ui.widgets.colours import theme_colour
from workbench.ui.widgets.rate_chart import ChartColours, draw_rate_chart

RATE_WINDOW_S = 1.0  # decode rate is averaged over this much engine time: batches are too jumpy
# Each answer is plotted from its own first token, the last few over each other: idle time between
# answers never squeezes the live one into a column, and the rates stay side by side (and bounded).
PLOTTED_ANSWERS = 5
REDRAW_INTERVAL_S = 1.0  # the chart redraws at most this often, however fast tokens come (a redraw costs ~20 ms)


def number_or_na(tokens_per_second: float) -> str:
    return f"{tokens_per_second:,.1f}" if tokens_per_second > 0 else "n/a"


@dataclass(frozen=True)
class SpeedView:
    """What the panel sets the measured rates against: the bandwidth bound at the current context and
    the speed model's prediction for the choice described (None: no ledger yet)."""

    bound_tps: float = 0.0
    prediction: SpeedPrediction | None = None
    board: str = ""  # a device profile simulated on this machine: the prediction is the board's, the rates here's
    host: str = ""  # the machine the engine runs on


def simulated_line(view: SpeedView) -> str:
    """For a simulated board: which figures are whose, and a rate measured above the board's prediction said so."""
    if not view.board:
        return ""
    return (f"{view.board} is simulated on {view.host}: the memory verdict is the board's, the measured t/s "
            f"are {view.host}'s; the board's own are predicted")


def predicted_line(prediction: SpeedPrediction | None, board: str = "") -> str:
    """"predicted: decode 117.6, prefill 214.6 tok/s (measured, x0.85-x1.15)", or why there is none; a simulated
    board's prediction is named as the board's."""
    where = f"predicted on {board}" if board else "predicted"
    if prediction is None:
        return f"{where}: no ledger yet"
    if prediction.method == "bound":
        why = (f"no published figures for {prediction.backend} on it" if board
               else "no measured or published figures: `workbench devices probe` measures this machine")
        return f"{where}: bound only ({why})"
    decode = number_or_na(prediction.decode_tps_empty or 0.0)
    prefill = number_or_na(prediction.prefill_tps or 0.0)
    return (f"{where}: decode {decode}, prefill {prefill} tok/s ({prediction.method}, "
            f"x{prediction.band[0]:.2f}-x{prediction.band[1]:.2f})")


class ChartView(Widget):
    """A drawn chart of fixed size: a new drawing is a repaint, never a layout of the screen."""

    class Resized(Message):
        """The chart's room changed (the window, or the turn table beside it): its drawing is stale."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.drawing: Text = Text("")
        self.drawn_size: tuple[int, int] = (0, 0)  # the content size the drawing was built for

    def show(self, drawing: Text, size: tuple[int, int]) -> None:
        self.drawing = drawing
        self.drawn_size = size
        self.refresh()  # a Static's update() would lay out the whole screen (~10 ms here) every time

    def on_resize(self) -> None:
        self.post_message(self.Resized())

    def render(self) -> Text:
        return self.drawing


class SpeedPanel(Vertical):
    """The screen calls `tokens_arrived` per batch and `turn_finished` per turn; sets `view`."""

    BORDER_TITLE = "Tokens/sec"
    # structure, not looks: the chart takes the room the turn table leaves (colours live in app.tcss)
    DEFAULT_CSS = """
    SpeedPanel #speed-chart { height: 1fr; min-height: 6; }
    SpeedPanel #speed-turns { height: auto; max-height: 5; }
    """

    view: reactive[SpeedView] = reactive(SpeedView)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        # one list of (seconds since the answer's first token, tok/s) per answer, the last PLOTTED_ANSWERS
        self.series: list[list[tuple[float, float]]] = []
        self.turns: list[TurnFinished] = []  # the table shows the last three; kept short too
        self._window: list[tuple[float, int]] = []
        self._origin: float | None = None  # engine time of this answer's first token
        self._dirty = True
        self._turn_count = 0  # answers finished in all (the table numbers them)

    def compose(self) -> ComposeResult:
        yield ChartView(id="speed-chart")
        yield Static(id="speed-turns")

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._mark_dirty())
        self.query_one("#speed-turns", Static).update(self._turn_table())
        self.set_interval(REDRAW_INTERVAL_S, self._redraw_if_dirty)
        # drawn after the first paint: the layout gives the chart its size first
        self.call_after_refresh(self._redraw)

    def on_chart_view_resized(self) -> None:
        # redrawn once the new layout is settled, not at the next tick: never a drawing of the old size
        self._mark_dirty()
        self.call_after_refresh(self._redraw_if_dirty)

    def turn_started(self) -> None:
        self.series.append([])
        del self.series[:-PLOTTED_ANSWERS]
        self._window = []
        self._origin = None

    def tokens_arrived(self, n_tokens: int, first_timestamp: float, last_timestamp: float) -> None:
        """One batch: the rate is tokens over engine time across the last RATE_WINDOW_S."""
        if not self.series:
            self.series.append([])
        if self._origin is None:
            self._origin = first_timestamp
        # window entries are (engine time, tokens generated so far in this turn)
        done = self._window[-1][1] if self._window else 0
        if not self._window:
            self._window.append((first_timestamp, 1))  # the turn's first token opens the window
        self._window.append((last_timestamp, done + n_tokens))
        while len(self._window) > 2 and last_timestamp - self._window[1][0] >= RATE_WINDOW_S:
            self._window.pop(0)
        (start, start_tokens), (end, end_tokens) = self._window[0], self._window[-1]
        if end > start and end_tokens > start_tokens:
            self.series[-1].append((end - self._origin, (end_tokens - start_tokens) / (end - start)))
            self._dirty = True

    def turn_finished(self, finished: TurnFinished) -> None:
        self.turns.append(finished)
        del self.turns[:-PLOTTED_ANSWERS]
        self._turn_count += 1
        self._window = []
        # the table first: its new rows take height from the chart, which is drawn after that layout
        self.query_one("#speed-turns", Static).update(self._turn_table())
        self._mark_dirty()
        self.call_after_refresh(self._redraw_if_dirty)

    @property
    def bound_tps(self) -> float:
        return self.view.bound_tps

    def watch_view(self) -> None:
        self._mark_dirty()
        # always in sight, however many turn lines there are: whose rates these are
        board = self.view.board
        self.border_title = f"Tokens/sec measured here, not on {board}" if board else self.BORDER_TITLE
        if self.is_mounted:
            self.query_one("#speed-turns", Static).update(self._turn_table())

    def _mark_dirty(self) -> None:
        self._dirty = True

    def _redraw_if_dirty(self) -> None:
        if self._dirty:
            self._redraw()

    def _redraw(self) -> None:
        """Draw the chart: built at most once a second, never on every repaint."""
        chart = self.query_one("#speed-chart", ChartView)
        width, height = chart.content_region.width, chart.content_region.height
        if width < 10 or height < 3:
            return  # hidden (a tab not shown) or too small: drawn when it gets room
        self._dirty = False
        surface = Color.parse(self.app.theme_variables.get("surface", "#000000"))
        decode = Color.parse(theme_colour(self.app, "chart-decode"))
        colours = ChartColours(latest=decode.hex, earlier=decode.blend(surface, 0.55).hex,
                               bound=Color.parse(theme_colour(self.app, "chart-bound")).hex,
                               text=Color.parse(self.app.theme_variables.get("foreground", "#ffffff")).hex)
        prediction = self.view.prediction
        predicted = (prediction.decode_tps_empty or 0.0) if prediction and prediction.method != "bound" else 0.0
        chart.show(draw_rate_chart(self.series, self.bound_tps, width, height, colours, predicted, self.view.board),
                   (width, height))

    def _turn_table(self) -> Group | Text:
        if not self.turns:
            bound = (f"bandwidth bound {rate(self.bound_tps)}" if self.bound_tps > 0
                     else "bandwidth bound n/a: the device profile gives no memory bandwidth")
            notes = "\n".join(filter(None, (predicted_line(self.view.prediction, self.view.board),
                                             simulated_line(self.view))))
            return Text(f"No turns yet. {bound}.\n{notes}", style="dim")
        table = Table(box=None, expand=True, padding=(0, 0, 0, 1), header_style="bold", show_edge=False)
        for name in ("#", "TTFT", "prefill t/s", "decode t/s", "tokens"):
            table.add_column(name, justify="left" if name == "#" else "right", no_wrap=True)
        shown = self.turns[-3:]
        for number, finished in enumerate(shown, start=self._turn_count - len(shown) + 1):
            table.add_row(f"#{number}", seconds(finished.ttft_s), number_or_na(finished.prefill_tps),
                          number_or_na(finished.decode_tps), str(finished.generated_tokens))
        lines = [predicted_line(self.view.prediction, self.view.board), simulated_line(self.view)]
        board_rate = self.view.prediction.decode_tps_empty if self.view.board and self.view.prediction else None
        fastest = max(finished.decode_tps for finished in shown)
        if board_rate and fastest > board_rate:
            lines.append(f"decode {fastest:,.1f} here is above the board's predicted {board_rate:,.1f}: "
                         f"{self.view.host}'s rate, not {self.view.board}'s")
        return Group(table, Text("\n".join(filter(None, lines)), style="dim"))
