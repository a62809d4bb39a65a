"""Maps the top-level data folders into the wheel as workbench.presets/themes/assets."""

from setuptools import find_packages, setup

DATA_FOLDERS = {"presets": ["*.toml", "devices/*.toml"], "themes": ["*.toml"], "assets": ["*", "**/*"]}

setup(
    packages=find_packages(include=["workbench", "workbench.*"]) + [f"workbench.{name}" for name in DATA_FOLDERS],
    package_dir={"workbench": "workbench", **{f"workbench.{name}": name for name in DATA_FOLDERS}},
    package_data={"workbench": ["**/*.tcss"], **{f"workbench.{name}": globs for name, globs in DATA_FOLDERS.items()}},
)
