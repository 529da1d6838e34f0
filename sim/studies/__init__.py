"""Batch studies (issue 11): a grid of model parameters measured point by point, in this process or on a
Dask cluster, into one tidy table; T_c from the Binder-cumulant crossings.

    spec.py    the study file (TOML), validated against the model's schema: ``load_study``
    point.py   one point -> one table row, a pure function: ``run_point``
    sweep.py   the runner: atomic table after each point, resume, progress bar, Dask: ``run_sweep``
    tc.py      Binder crossings with bootstrap errors over seeds, peaks, figures: ``analyse``, ``plot``
    progress.py  points done and the time left of a running sweep (the Study panel): ``SweepProgress``
"""
from latticelab.sim.studies.spec import Point, Study, StudyError, load_study, parse_study

__all__ = ["Point", "Study", "StudyError", "load_study", "parse_study"]
