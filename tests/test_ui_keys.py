"""The README's key table and the footer agree at every size, and no footer key is cut off."""

import re
from pathlib import Path

import pytest
from fakes import make_app, wait_until
from textual.widgets._footer import FooterKey

from workbench.ui.engine_session import GENERATING

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_keys() -> dict[str, str]:
    """Key (as the README spells it, e.g. "Ctrl+L") -> what the README says it does, from "The app" table."""
    section = README.read_text().split("## The app", 1)[1].split("\n## ", 1)[0]
    keys: dict[str, str] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("key", "") or set(cells[0]) <= set("-"):
            continue
        for key in re.split(r"\s*(?:/|,)\s*", cells[0]):
            keys[key] = cells[1]
    return keys


def readme_spelling(key: str) -> str:
    """Textual's key name as the README writes it: ctrl+l -> Ctrl+L, escape -> Esc, f2 -> F2."""
    named = {"escape": "Esc", "enter": "Enter"}
    return "+".join(named.get(part, part.capitalize() if len(part) > 1 else part.upper()) for part in key.split("+"))


def test_readme_spelling_of_keys():
    assert [readme_spelling(k) for k in ("ctrl+l", "escape", "f5", "alt+1")] == ["Ctrl+L", "Esc", "F5", "Alt+1"]


@pytest.mark.parametrize("size", [(80, 24), (120, 34), (160, 48)])
async def test_every_footer_key_is_in_the_readme_and_fits_the_screen(size):
    documented = readme_keys()
    engines = []
    async with make_app(engines, engine_kwargs={"token_delay_s": 0.2}).run_test(size=size) as pilot:
        screen = pilot.app.main_screen
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: engines and engines[0].loaded is not None)
        await pilot.press(*"hi", "enter")  # Esc joins the footer while an answer streams
        await wait_until(pilot, lambda: screen.phase == GENERATING)
        await pilot.pause(0.3)
        shown = [key for key in screen.query(FooterKey)]
        names = [readme_spelling(key.key) for key in shown]
        assert {"Ctrl+L", "Esc", "Ctrl+S", "F2", "F3", "F4", "F5", "F6", "Ctrl+R", "Ctrl+N", "Ctrl+Q",
                "Ctrl+P"} <= set(names)
        for key, name in zip(shown, names):
            assert name in documented, f"{name} ({key.description}) is in the footer but not in the README"
            assert key.region.width > 0 and key.region.right <= size[0], f"{name} is cut off at {size}"
        # the keys the footer leaves out are in the README too
        for hidden in ("Ctrl+PgDn", "Ctrl+PgUp", "Alt+1", "Alt+5", "Enter"):
            assert hidden in documented
        await pilot.press("escape")
