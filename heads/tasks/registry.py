"""The task registry: ``register_task("name")`` on a Task subclass; unknown names list the known ones."""

from __future__ import annotations

from heads.tasks.base import Task

TASKS: dict[str, type[Task]] = {}


def register_task(name: str):
    def decorate(cls: type[Task]) -> type[Task]:
        if name in TASKS and TASKS[name] is not cls:
            raise ValueError(f"task {name!r} is already registered by {TASKS[name].__name__}")
        cls.name = name
        TASKS[name] = cls
        return cls

    return decorate


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise KeyError(f"unknown task {name!r}; known tasks: {sorted(TASKS)}")
    return TASKS[name]()
