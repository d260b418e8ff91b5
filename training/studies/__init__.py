"""The studies: what a study trains, how its runs are read, and what is computed from them.

* :mod:`training.studies.study`: the one study spec, :class:`~training.studies.study.StudySpec`;
* :mod:`training.studies.records`: the one reader of run folders,
  :class:`~training.studies.records.RunRecord`;
* :mod:`training.studies.regimes`, :mod:`training.studies.selection`,
  :mod:`training.studies.population`, :mod:`training.studies.reproduce`: the regimes of a
  reproduction, the selection protocols, populations and ``interp-init reproduce``;
* :mod:`training.studies.recipe`, :mod:`training.studies.race`,
  :mod:`training.studies.verdict`: the papers' recipe, the race of (3,4) against (4,3), a
  run's verdict;
* :mod:`training.studies.sweep`, :mod:`training.studies.phase`,
  :mod:`training.studies.report`: sweeps, phase diagrams and the report.

The studies stand on the launchers (:mod:`training.launch`), which stand on the trainer
(:mod:`training.trainer`); the command line (:mod:`training.cli`) stands on all three
(docs/layout.md).  Import from the modules; this ``__init__`` imports nothing, so that the
command line's modules stay free of torch.
"""
