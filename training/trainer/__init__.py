"""The trainer: one run or a same-shape group of runs, from a config to a trained model.

* :mod:`training.trainer.step`: the training step (the fast last-position forward, the
  optimizer, denormal flushing);
* :mod:`training.trainer.accuracy`: evaluation (accuracy per target);
* :mod:`training.trainer.loop`: the loop (:func:`~training.trainer.loop.train`);
* :mod:`training.trainer.ensemble`: same-shape runs trained together
  (:func:`~training.trainer.ensemble.train_ensemble`);
* :mod:`training.trainer.preflight`: the memory and size checks before a run.

It stands on :mod:`training.config` and the base packages only; the launchers
(:mod:`training.launch`) and the studies (:mod:`training.studies`) stand on it.  Import
from the modules (``from training import train`` is the short way); this ``__init__``
imports nothing, so that the command line's modules stay free of torch.
"""
