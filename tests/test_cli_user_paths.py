"""Cross-command paths a field engineer takes: bad arguments, pipes, narrow terminals."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(("argv", "complaint"), [
    (("ledger", "bundled", "--preset", "as-is", "--ctx", "abc"), "workbench ledger: argument --ctx: invalid int value: 'abc'"),
    (("ledger",), "workbench ledger: the following arguments are required: model"),
    (("bench", "compare"), "workbench bench compare: the following arguments are required: files"),
    (("monitor", "--interval", "fast"), "workbench monitor: argument --interval: invalid float value: 'fast'"),
    (("no-such-command",), "workbench: argument COMMAND: invalid choice: 'no-such-command'"),
    (("inspect", "bundled", "--ctx", "5"), "workbench inspect: unrecognized arguments: --ctx 5"),
])
def test_bad_arguments_are_one_line_with_the_help_to_read(argv, complaint, cli):
    done = cli(*argv)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()  # no usage block above the complaint
    assert line.startswith(complaint)
    assert line.endswith(f"See `{complaint.split(':')[0]} --help`")
