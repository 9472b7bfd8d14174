"""Tasks: data + model family + metric (``lm``, ``mt``, ``cls``, ``coherence``)."""

from heads.tasks import cls, coherence, lm, mt  # noqa: F401  (registration)
from heads.tasks.base import Task
from heads.tasks.registry import TASKS, get_task, register_task

__all__ = ["TASKS", "Task", "get_task", "register_task"]
