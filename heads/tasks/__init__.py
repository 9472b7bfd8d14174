"""Tasks: data + model family + metric (``lm``, ``mt``, ``cls``, ``cls_hard``, ``coherence``, ``retrieval``)."""

from heads.tasks import cls, cls_hard, coherence, lm, mt, retrieval  # noqa: F401  (registration)
from heads.tasks.base import Task
from heads.tasks.registry import TASKS, get_task, register_task

__all__ = ["TASKS", "Task", "get_task", "register_task"]
