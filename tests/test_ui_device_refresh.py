"""A device profile written while the app runs is offered when the device selector gets focus (no restart)."""

from fakes import make_app, wait_until
from textual.widgets import Select

from workbench.core.config.devices import user_devices_dir
from workbench.ui.widgets.choice_bar import ChoiceBar


def offered(select: Select) -> list[str]:
    return [str(value) for _, value in select._options]


async def test_a_profile_added_while_the_app_runs_is_offered_on_focus():
    announced: list[ChoiceBar.Changed] = []  # each choice the bar announced, once (it reaches the screen and the app)

    def hook(message) -> None:
        if isinstance(message, ChoiceBar.Changed) and not any(seen is message for seen in announced):
            announced.append(message)

    async with make_app(device="jetson-orin-nano-8gb").run_test(size=(160, 48), message_hook=hook) as pilot:
        screen = pilot.app.main_screen
        await wait_until(pilot, lambda: screen.ledger is not None)
        select = screen.query_one("#device-select", Select)
        assert "bench-board" not in offered(select)
        folder = user_devices_dir()  # the test's private home (conftest)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "bench-board.toml").write_text('name = "bench-board"\nram_total_mb = 2048\nmem_bandwidth_gbs = 8\n'
                                                 'cores = 4\n\n[reserves_mb]\nos = 300\n')
        select.focus()
        await wait_until(pilot, lambda: "bench-board" in offered(select))
        assert select.value == "jetson-orin-nano-8gb"  # the choice stays
        select.value = "bench-board"
        await wait_until(pilot, lambda: screen.ledger is not None and screen.ledger.device == "bench-board")
        # refreshing the list chose nothing on the way (set_options picks its first option): one choice, the user's
        assert [message.choice.device_name for message in announced] == ["bench-board"]
