"""The trainer, which knows no folders: the step (:mod:`~training.trainer.step`), evaluation
(:mod:`~training.trainer.loop`), the loop (:mod:`~training.trainer.loop`), ensembles
(:mod:`~training.trainer.ensemble`) and the checks before a run
(:mod:`~training.trainer.preflight`).  The launchers (:mod:`training.launch`) open the run
folder around it.  Import from the modules (``from training import train``: the short way).
"""
