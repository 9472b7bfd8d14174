"""The task registry: ``register_task("name")`` on a Task subclass; unknown names list the known ones.

Tasks from other packages register alike, as strategies do: a module named in the ``heads.tasks`` entry-point
group or in the ``HEADS_PLUGINS`` environment variable (comma-separated module names) is imported the first
time a name is not found, and its ``@register_task`` runs.
"""

from __future__ import annotations

from heads import registry
from heads.registry import Registry
from heads.tasks.base import Task

TASK_PLUGINS = "heads.tasks"  # the entry-point group of tasks from other packages

TASKS: Registry[type[Task]] = Registry("task")
register_task = TASKS.register


def get_task(name: str) -> Task:
    if name not in TASKS:
        load_plugins()
    return TASKS.lookup(name)()


def load_plugins() -> None:
    """Import the task plugins: the ``heads.tasks`` entry points, then the ``HEADS_PLUGINS`` modules."""
    registry.load_plugins(TASK_PLUGINS)
