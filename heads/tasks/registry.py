"""The task registry: ``register_task("name")`` on a Task subclass; unknown names list the known ones."""

from __future__ import annotations

from heads.registry import Registry
from heads.tasks.base import Task

TASKS: Registry[type[Task]] = Registry("task")
register_task = TASKS.register


def get_task(name: str) -> Task:
    return TASKS.lookup(name)()
