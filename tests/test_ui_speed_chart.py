"""The tokens/sec chart: values drawn where the axis says, even round ticks, real height at every size, and one
panel split from 120x34 up (no jump between 155 and 160 columns)."""

import re

import pytest
from fakes import make_app, rendered, wait_until

from workbench.ui.engine_session import LOADED
from workbench.ui.widgets.prompt_input import PromptInput
from workbench.ui.widgets.rate_chart import ChartColours, draw_rate_chart
from workbench.ui.widgets.speed_panel import ChartView

COLOURS = ChartColours(latest="#00ff00", earlier="#007700", bound="#ff0000", text="#ffffff")
BLOCKS = " ▁▂▃▄▅▆▇█"


def axis(lines: list[str]) -> list[tuple[int, float]]:
    """(row, value) of every labelled row: the label stands before ┤ (└ on the time axis)."""
    found = []
    for row, line in enumerate(lines):
        match = re.match(r"^\s*([\d,.]+)[┤└]", line)
        if match:
            found.append((row, float(match.group(1).replace(",", ""))))
    return found


def bar_height(lines: list[str], column: int) -> float:
    """How high the bar in `column` (0 = first plot column) reaches, in rows above the time axis."""
    start = lines[-1].index("└") + 1
    height = 0.0
    for line in reversed(lines[:-1]):
        if "┤" not in line and "│" not in line:
            break  # the title
        cell = line[start + column]
        if cell in BLOCKS and cell != " ":
            height += BLOCKS.index(cell) / 8
    return height


@pytest.mark.parametrize("rows", [5, 6, 8, 12, 17])
def test_a_rate_is_drawn_at_the_height_its_axis_gives_it(rows):
    # 32.6 tok/s beside a bound of 262.4 (the case drawn as a full bar at the "262.4" tick before)
    series = [[(0.1 * n, 32.6) for n in range(1, 11)]]
    text = draw_rate_chart(series, 262.4, 60, rows, COLOURS).plain
    lines = text.split("\n")
    assert len(lines) == rows and all(len(line) <= 60 for line in lines)
    ticks = axis(lines)
    values = [value for _, value in ticks]
    assert values[-1] == 0 and len(ticks) >= 2
    # even ticks: the same step between values and the same number of rows between labels
    assert len({round(a - b, 9) for a, b in zip(values, values[1:])}) == 1
    assert len({b - a for (a, _), (b, _) in zip(ticks, ticks[1:])}) == 1
    # the axis read as the user reads it: rows per unit from the labels, so 32.6 should stand this high
    (top_row, top_value), (zero_row, _) = ticks[0], ticks[-1]
    expected = 32.6 / top_value * (zero_row - top_row)
    assert abs(bar_height(lines, 30) - expected) <= 1 / 16 + 1e-9, (bar_height(lines, 30), expected)
    assert top_value < 262.4 and "bound 262 (above the chart)" in lines[0]


def test_a_bound_within_reach_is_on_the_scale_and_drawn_as_a_line():
    lines = draw_rate_chart([[(0.5, 40.0), (1.0, 42.0)]], 55.0, 40, 10, COLOURS).plain.split("\n")
    assert "bound 55" in lines[0] and "above" not in lines[0] and "predicted" not in lines[0]
    assert axis(lines)[0][1] >= 55
    assert any("╌" in line for line in lines)


async def chart_after_an_answer(size):
    app = make_app(device="raspberry-pi-5-8gb", token_batch_interval_s=0)  # published CPU figures: a prediction
    pilot_context = app.run_test(size=size)
    pilot = await pilot_context.__aenter__()
    screen = pilot.app.main_screen
    await wait_until(pilot, lambda: screen.ledger is not None)
    await pilot.press("ctrl+l")
    await wait_until(pilot, lambda: screen.phase == LOADED)
    screen.query_one(PromptInput).value = "hi"
    await pilot.press("enter")
    await wait_until(pilot, lambda: len(screen.conversation.messages) == 2 and screen.phase == LOADED)
    screen.show_tab("speed")
    chart = screen.query_one(ChartView)
    await wait_until(pilot, lambda: chart.drawn_size == (chart.content_region.width, chart.content_region.height)
                     and chart.drawn_size[1] > 0 and not chart.parent._dirty)
    return pilot_context, screen, chart


@pytest.mark.parametrize("size,least_rows", [((80, 24), 5), ((120, 34), 6), ((155, 45), 12), ((160, 48), 12)])
async def test_the_chart_has_real_height_at_every_size(size, least_rows):
    context, screen, chart = await chart_after_an_answer(size)
    try:
        lines = rendered(chart).rstrip("\n").split("\n")
        assert chart.content_region.height >= least_rows and len(lines) == chart.content_region.height
        assert len(axis(lines)) >= 3  # at least two rows of scale above zero
        # the fake engine decodes at 40 tok/s (one token per 25 ms of its clock): the bar stands at 40
        ticks = axis(lines)
        (top_row, top_value), (zero_row, _) = ticks[0], ticks[-1]
        expected = 40.0 / top_value * (zero_row - top_row)
        assert abs(bar_height(lines, 5) - expected) <= 1 / 16 + 1e-9
        # the prediction stands in the chart's title, in sight where the lines below the chart have no room
        prediction = chart.parent.view.prediction
        assert prediction.method == "published"
        assert re.search(rf"predicted {prediction.decode_tps_empty:,.0f}( on raspberry-pi-5-8gb)?, bound \d", lines[0])
    finally:
        await context.__aexit__(None, None, None)


async def test_the_panel_split_does_not_jump_between_155_and_160_columns():
    shares = {}
    for width in (155, 159, 160):
        async with make_app(device="jetson-orin-nano-8gb").run_test(size=(width, 48)) as pilot:
            await pilot.pause()
            screen = pilot.app.main_screen
            panels, ledger = screen.query_one("#panels").region, screen.query_one("#ledger-panel").region
            speed = screen.query_one("#speed-panel").region
            footer = screen.query_one("Footer").region.height  # two rows of keys below 160 columns, else one
            shares[width] = (panels.width / width, ledger.width / panels.width, ledger.height, speed.height + footer)
    for width in (159, 160):
        assert abs(shares[width][0] - shares[155][0]) < 0.02 and abs(shares[width][1] - shares[155][1]) < 0.02
        assert shares[width][2:] == shares[155][2:]


def test_ticks_of_a_fractional_step_keep_their_decimals():
    lines = draw_rate_chart([[(0.5, 14.0), (1.0, 13.0)]], 0.0, 40, 16, COLOURS).plain.split("\n")
    values = [value for _, value in axis(lines)]
    assert values == [15.0, 12.5, 10.0, 7.5, 5.0, 2.5, 0.0]  # 14 tok/s under six even steps of 2.5


def test_the_title_keeps_both_numbers_and_drops_words_as_the_chart_narrows():
    def title(width):
        return draw_rate_chart([[(0.5, 40.0)]], 550.0, width, 8, COLOURS, predicted=101.4,
                               board="raspberry-pi-5-8gb").plain.split("\n")[0].rstrip()

    assert title(120) == ("decode tok/s, this answer — predicted 101 on raspberry-pi-5-8gb, "
                          "bound 550 (above the chart)")
    assert title(80) == "decode tok/s — predicted 101 on raspberry-pi-5-8gb, bound 550 (above the chart)"
    assert title(60) == "decode tok/s — predicted 101, bound 550 (above the chart)"
    assert title(44) == "decode tok/s — predicted 101, bound 550"
    assert title(20) == "decode tok/s — predi"  # nothing fits: the shortest, cropped
