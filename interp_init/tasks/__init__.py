"""The tasks: what a task is and its typed metrics (:mod:`~interp_init.tasks.base`), the
registry of tasks by name (:mod:`~interp_init.tasks.registry`), the anchor-function tasks'
pairs and targets (:mod:`~interp_init.tasks.anchor_pairs`, no torch) and their task classes
(:mod:`~interp_init.tasks.anchor`), the addition task (:mod:`~interp_init.tasks.addition`),
the sequence tasks (SCAN, :mod:`~interp_init.tasks.scan`, and COGS, :mod:`~interp_init.tasks.cogs`,
on their shared part :mod:`~interp_init.tasks.seq2seq`; a byte-level language model on code,
:mod:`~interp_init.tasks.code_lm`), the generated k-hop reasoning task
(:mod:`~interp_init.tasks.prontoqa`), the benchmark data shipped with the package
(:mod:`~interp_init.tasks.shipped`) and the checks of what a task returns
(:mod:`~interp_init.tasks.checks`).

Import from the modules; this package's ``__init__`` imports nothing, so that importing
:mod:`~interp_init.tasks.anchor_pairs` stays free of torch.
"""
