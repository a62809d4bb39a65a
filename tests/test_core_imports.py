"""The core never pulls in Textual or Rich: every core module imports in a bare interpreter."""

import pkgutil
import subprocess
import sys

import workbench.core


def test_core_modules_import_without_textual_or_rich():
    names = sorted(
        info.name for info in pkgutil.walk_packages(workbench.core.__path__, prefix="workbench.core.")
    )
    assert "workbench.core.errors" in names
    script = (
        "import importlib, sys\n"
        f"for name in {names!r}: importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout
