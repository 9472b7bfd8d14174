"""The task registry: ``register_task("name")`` on a Task subclass; unknown names list the known ones.

Tasks from other packages register alike, as strategies do: a module named in the ``heads.tasks`` entry-point
group or in the ``HEADS_PLUGINS`` environment variable (comma-separated module names) is imported the first
time a name is not found, and its ``@register_task`` runs. The names alone, without importing torch:
:func:`heads.registry.known`.
"""

from __future__ import annotations

from heads import registry
from heads.registry import Registry
from heads.tasks.base import Task

TASK_PLUGINS = registry.PLUGIN_GROUPS["task"][0]  # the entry-point group of tasks from other packages

TASKS: Registry[type[Task]] = Registry("task")
register_task = TASKS.register


def get_task(name: str) -> Task:
    if name not in TASKS:
        registry.import_declared("task", name)  # one of the package's own, in a module not imported yet
    if name not in TASKS:
        registry.plugins("task")  # the heads.tasks entry points, then the HEADS_PLUGINS modules
    return TASKS.lookup(name)()
