"""The registry of tasks: every built-in task registered by name in one place
(:data:`BUILTIN_TASKS`), a researcher's own named by its import path.

:func:`task_class` gives the class of a registered name (``symmetric``, ``id-ood``,
``complexity``, ``addition``, ``scan``, ``cogs``, ``code-lm``, ``prontoqa``) or of an import path ``package.module:ClassName``, checked
(:func:`interp_init.tasks.base.check_task_class`: a class lacking a required part is refused with
one line naming every missing part); :func:`make_task` builds one with its options.
Adding a built-in task is one new module with its class and one line in
:data:`BUILTIN_TASKS`; a package of one's own calls :func:`register_task` (docs/tasks.md).

Example::

    >>> from interp_init.tasks.registry import make_task, registered_tasks
    >>> registered_tasks()
    ('symmetric', 'id-ood', 'complexity', 'addition', 'scan', 'cogs', 'code-lm', 'prontoqa')
    >>> make_task("addition").name
    'addition'
"""

from __future__ import annotations

import pkgutil
from dataclasses import fields
from typing import Any

from interp_init.tasks.addition import AdditionTask
from interp_init.tasks.anchor import ComplexityTask, IdOodTask, SymmetricTask
from interp_init.tasks.base import Task, check_task_class
from interp_init.tasks.code_lm import CodeLmTask
from interp_init.tasks.cogs import CogsTask
from interp_init.tasks.prontoqa import PrOntoQATask
from interp_init.tasks.scan import ScanTask

#: The built-in tasks, by name: one line per task.
BUILTIN_TASKS: dict[str, type[Task]] = {
    "symmetric": SymmetricTask,
    "id-ood": IdOodTask,
    "complexity": ComplexityTask,
    "addition": AdditionTask,
    "scan": ScanTask,
    "cogs": CogsTask,
    "code-lm": CodeLmTask,
    "prontoqa": PrOntoQATask,
}

_REGISTRY: dict[str, type[Task]] = {}


def register_task(name: str, cls: type[Task]) -> type[Task]:
    """Register ``cls`` under ``name`` (validated; the class then reports ``name`` as its
    :attr:`~interp_init.tasks.base.Task.name`); returns ``cls``."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"a task's name is a non-empty string without ':', got {name!r}")
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"task name {name!r} is taken by {_REGISTRY[name].__qualname__}")
    check_task_class(cls, name)
    if cls.__dict__.get("registered_name") not in (None, name):
        raise ValueError(f"{cls.__qualname__} is registered already, as {cls.registered_name!r}")
    cls.registered_name = name
    _REGISTRY[name] = cls
    return cls


for _name, _cls in BUILTIN_TASKS.items():
    register_task(_name, _cls)


def registered_tasks() -> tuple[str, ...]:
    """The registered task names, in registration order."""
    return tuple(_REGISTRY)


def task_class(name: str) -> type[Task]:
    """The task class of a registered name or of an import path ``package.module:ClassName``."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    if not isinstance(name, str) or ":" not in name:
        raise ValueError(
            f"unknown task {name!r}; choose one of {registered_tasks()} or give your own as package.module:ClassName"
        )
    module, _, attr = name.partition(":")
    try:
        cls = pkgutil.resolve_name(name)
    except ModuleNotFoundError as err:
        raise ValueError(
            f"task {name!r}: cannot import module {module!r} ({err}); put its folder on PYTHONPATH"
        ) from None
    except (AttributeError, ValueError) as err:
        raise ValueError(f"task {name!r}: module {module!r} has no class {attr!r} ({err})") from None
    check_task_class(cls, name)
    return cls


def tasks_taking(option: str) -> tuple[str, ...]:
    """The registered tasks that take ``option`` (a field of their class)."""
    return tuple(n for n in registered_tasks() if option in {f.name for f in fields(task_class(n))})


def make_task(name: str, **options: Any) -> Task:
    """The task ``name`` with its ``options`` (the fields of its class); an option the task
    does not take is a ``ValueError`` naming it."""
    cls = task_class(name)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        takes = f"its options are {sorted(known)}" if known else "it takes no options"
        raise ValueError(f"{unknown} do(es) not apply to task {name!r}: {takes}")
    return cls(**options)
