"""The tasks `workbench bench --task` knows, by name."""

from __future__ import annotations

from workbench.core.errors import WorkbenchError
from workbench.core.tasks.arithmetic import ADD_SMALL, WORD_PROBLEMS
from workbench.core.tasks.questions import Task
from workbench.core.tasks.units import UNIT_CONVERT

TASKS: dict[str, Task] = {task.name: task for task in (ADD_SMALL, WORD_PROBLEMS, UNIT_CONVERT)}


def find_task(name: str) -> Task:
    task = TASKS.get(name)
    if task is None:
        raise WorkbenchError(f"unknown task {name!r}", where="bench --task",
                             fix=f"use one of: {', '.join(TASKS)} (`workbench bench --task list`)")
    return task
