"""The tasks: what a task is and its typed metrics (:mod:`~interp_init.tasks.base`), the
registry of tasks by name (:mod:`~interp_init.tasks.registry`), the anchor-function tasks'
pairs and targets (:mod:`~interp_init.tasks.anchor_pairs`, no torch) and their task classes
(:mod:`~interp_init.tasks.anchor`), the addition task (:mod:`~interp_init.tasks.addition`)
and the checks of what a task returns (:mod:`~interp_init.tasks.checks`).

Import from the modules; this package's ``__init__`` imports nothing, so that importing
:mod:`~interp_init.tasks.anchor_pairs` stays free of torch.
"""
