"""Themes load from themes/*.toml with the app's colour variables; a bad file is one clear line."""

import pytest

from workbench.core.errors import WorkbenchError
from workbench.ui.themes import APP_COLOUR_DEFAULTS, DEFAULT_THEME, load_themes, theme_from_toml


def test_shipped_themes_define_every_app_colour():
    themes = {theme.name: theme for theme in load_themes()}
    assert {DEFAULT_THEME, "projector-light", "amber-field"} <= set(themes)
    assert themes["projector-light"].dark is False
    for theme in themes.values():
        assert set(theme.variables) == set(APP_COLOUR_DEFAULTS), theme.name
    # the themes restyle the categories: not every theme draws weights in the same colour
    assert len({theme.variables["ledger-weights"] for theme in themes.values()}) == len(themes)


def test_unknown_key_is_named_with_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "bad"\nprimary = "#ffffff"\nprimray = "#000000"\n')
    with pytest.raises(WorkbenchError) as caught:
        theme_from_toml(path)
    message = str(caught.value)
    assert "prim" in message and str(path) in message and "\n" not in message


def test_unknown_variable_and_broken_toml_are_errors(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text('name = "t"\nprimary = "#ffffff"\n[variables]\nledger-weight = "#000000"\n')
    with pytest.raises(WorkbenchError, match="ledger-weight"):
        theme_from_toml(path)
    path.write_text('name = "t\n')
    with pytest.raises(WorkbenchError, match="cannot read theme"):
        theme_from_toml(path)


def test_folder_of_themes_loads_sorted(tmp_path):
    for name in ("zeta", "alpha"):
        (tmp_path / f"{name}.toml").write_text(f'name = "{name}"\nprimary = "#123456"\n')
    assert [theme.name for theme in load_themes(tmp_path)] == ["alpha", "zeta"]
