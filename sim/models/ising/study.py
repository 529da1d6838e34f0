"""What a study measures on the Ising model (the study capability, sim/studies/capability.py): per sample the
energy and signed magnetisation per spin (the HasMagnetisation reduction), and over the window their means,
the heat capacity C_v, the susceptibility chi, <m^2>, <m^4> and the Binder cumulant U with blocking and
jackknife errors (sim/analysis/critical.py ``thermodynamics``)."""
from __future__ import annotations

import numpy as np

from latticelab.sim.studies.capability import Measure, StudyMeasures

DERIVED = (
    Measure("energy", "energy per spin <e>", "J"),
    Measure("heat_capacity", "heat capacity per spin C_v"),
    Measure("abs_magnetisation", "|M| per spin <|m|>"),
    Measure("m2", "<m^2>"),
    Measure("m4", "<m^4>"),
    Measure("susceptibility", "susceptibility per spin chi"),
    Measure("binder", "Binder cumulant U"),
)


class ThermodynamicsRecorder:
    def __init__(self, model_class, wanted):
        from latticelab.sim.analysis.critical import measurer
        self.measure = measurer(model_class)
        self.series = {name: [] for name in self.measure.series}

    def start(self, model) -> None:
        pass

    def sample(self, model) -> None:
        for name, value in self.measure(model).items():
            self.series[name].append(value)

    def result(self, model, n_blocks: int) -> dict:
        from latticelab.sim.analysis.critical import thermodynamics
        n_sites = int(np.prod(model.shape))
        # "magnetisation" is the measurer's signed series (HasMagnetisation), not the |M| observable
        stats = thermodynamics(model.params.T, n_sites, self.series.get("energy"), self.series.get("magnetisation"),
                               n_blocks=n_blocks)
        return {m.name: (stats.get(m.name), stats.get(f"{m.name}_err")) for m in DERIVED}


def suggest(params) -> dict:
    """Binder curves of two sizes over +-5% of the running temperature (2.269 for the 2D critical point)."""
    T = float(getattr(params, "T", 2.269))
    return {"grid": {"L": [8, 16], "T": {"start": round(0.95 * T, 4), "stop": round(1.05 * T, 4), "num": 6},
                     "seed": [1, 2]},
            "run": {"equilibrate": 500, "decorrelate": 1, "measurements": 1000}}


STUDY = StudyMeasures(derived=DERIVED, recorder=ThermodynamicsRecorder, observables=("flipped_fraction",),
                      suggest=suggest, plot={"measure": "binder", "against": "T", "by": "L"})
