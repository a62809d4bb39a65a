"""The streaming answer text: wrapped as it grows, height reserved a few lines at a time, re-wrapped on resize."""

from fakes import panel_host

from workbench.ui.widgets.streaming_text import StreamingText


def shown_lines(widget: StreamingText) -> list[str]:
    return [widget.render_line(y).text.rstrip() for y in range(widget.size.height)]


async def test_text_wraps_as_it_grows_and_height_grows_by_the_reserve():
    widget = StreamingText(reserve_lines=4)
    async with panel_host(widget).run_test(size=(20, 12)) as pilot:
        for word in "one two three four five six".split():
            widget.append(word + " ")
        await pilot.pause()
        assert shown_lines(widget) == ["one two three four", "five six", "", ""]
        widget.append("\n\nseven eight nine ten eleven twelve")
        await pilot.pause()
        assert widget.line_count == 5 and widget.size.height == 8  # two reserves of four lines
        assert shown_lines(widget)[:5] == ["one two three four", "five six", "", "seven eight nine ten", "eleven twelve"]
        assert widget.text == "one two three four five six \n\nseven eight nine ten eleven twelve"


async def test_a_narrower_view_rewraps_every_paragraph():
    widget = StreamingText("alpha beta gamma delta\nepsilon")
    async with panel_host(widget).run_test(size=(30, 12)) as pilot:
        await pilot.pause()
        assert shown_lines(widget) == ["alpha beta gamma delta", "epsilon"]
        await pilot.resize_terminal(12, 12)
        await pilot.pause()
        assert shown_lines(widget) == ["alpha beta", "gamma delta", "epsilon"]
