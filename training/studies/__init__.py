"""The studies, on the launchers: the one spec (:mod:`~training.studies.study`), the one
reader of run folders (:mod:`~training.studies.records`), the regimes, protocols,
populations and ``reproduce``, the recipe, the race and a run's verdict, and, standing on
them, sweeps (:mod:`~training.studies.sweep`), phase diagrams (:mod:`~training.studies.phase`)
and the report (:mod:`~training.studies.report`).  Import from the modules.
"""
