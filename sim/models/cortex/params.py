"""The cortical network's parameters, declared once (sim/params.py says what is derived from them).

Names and defaults follow thesis 003, sections 8.1 to 8.3: the inputs I, noise n, washout amplitude A and
time constant tau per neuron type (e: excitatory, i: inhibitory), and the drug factors lambda of equations
8.4 and 8.5, all changeable between steps ("live"); the grid, in-degree, radius and excitatory fraction make a
new network ("rebuild"). The inputs default to the thesis's test configuration (section 8.5: I_e = 3.0,
n_e = 4.5, I_i = 2.0, n_i = 3.0), so a new network is active at once.
"""
from __future__ import annotations

import pydantic

from latticelab.sim.params import ModelParams, ParameterError, param

DEFAULT_L = {False: 128, True: 1024}      # gpu -> L
MAX_RADIUS_DEFAULT = 64                   # the thesis's benchmark radius


def default_radius(L: int) -> int:
    """r = L/8, at least 1 and at most 64 (the thesis's benchmark value at L = 1024)."""
    return max(1, min(MAX_RADIUS_DEFAULT, L // 8))


class CortexParams(ModelParams):
    """Parameters of the cortical spiking network (thesis 003, chapter 8). Time in ms (one step = 1 ms)."""

    model_name = "cortex"

    L: int = param(128, label="Size L", help="side of the periodic grid of L x L neurons; default 128 on the CPU, "
                   "1024 on a GPU", applies="rebuild", ge=4, le=8192)
    k: int = param(100, label="In-degree k", help="incoming connections per neuron (the same for every neuron)",
                   applies="rebuild", ge=1, le=1000)
    r: int = param(16, label="Radius r", help="largest distance of a source from its receiver (r <= L/2); "
                   "sources are normal around the receiver with sigma = r/3; default L/8, at most 64",
                   applies="rebuild", ge=1, le=4096)
    excitatory_fraction: float = param(0.8, label="Excitatory fraction", help="probability that a neuron is "
                                       "excitatory (4:1 = 0.8)", applies="rebuild", ge=0, le=1)
    I_e: float = param(3.0, label="Input I_e", help="base input current of excitatory neurons", unit="mV/ms",
                       ge=-100, le=100)
    I_i: float = param(2.0, label="Input I_i", help="base input current of inhibitory neurons", unit="mV/ms",
                       ge=-100, le=100)
    n_e: float = param(4.5, label="Noise n_e", help="standard deviation of the normal noise added to I_e",
                       unit="mV/ms", ge=0, le=100)
    n_i: float = param(3.0, label="Noise n_i", help="standard deviation of the normal noise added to I_i",
                       unit="mV/ms", ge=0, le=100)
    boost: float = param(10.0, label="Boost", help="extra input to the boosted neurons while a boost is active",
                         unit="mV/ms", ge=0, le=100)
    boost_fraction: float = param(0.0, label="Boost fraction", help="fraction of the neurons, drawn anew each "
                                  "step, that get the boost (0: no boost)", ge=0, le=1)
    A_e: float = param(0.25, label="Amplitude A_e", help="excitatory post-synaptic potential at its arrival "
                       "(washout W(t) = A exp(-t/tau))", unit="mV", ge=0, le=100)
    tau_e: float = param(10.0, label="Washout tau_e", help="time constant of the excitatory washout", unit="ms",
                         gt=0, le=1000)
    A_i: float = param(-0.5, label="Amplitude A_i", help="inhibitory post-synaptic potential at its arrival "
                       "(negative)", unit="mV", ge=-100, le=0)
    tau_i: float = param(10.0, label="Washout tau_i", help="time constant of the inhibitory washout", unit="ms",
                         gt=0, le=1000)
    # the factors that divide are bounded below by 0.01 (a 100-fold change): below that a washout overflows
    lambda_A_e: float = param(1.0, label="Drug lambda_A_e", help="drug factor: effective A_e = A_e / lambda",
                              ge=0.01, le=100)
    lambda_tau_e: float = param(1.0, label="Drug lambda_tau_e", help="drug factor: effective tau_e = tau_e / "
                                "lambda", ge=0.01, le=100)
    lambda_I_e: float = param(1.0, label="Drug lambda_I_e", help="drug factor: effective I_e = I_e - lambda + 1",
                              ge=-100, le=100)
    lambda_A_i: float = param(1.0, label="Drug lambda_A_i", help="drug factor: effective A_i = A_i * lambda",
                              ge=0, le=100)
    lambda_tau_i: float = param(1.0, label="Drug lambda_tau_i", help="drug factor: effective tau_i = tau_i * "
                                "lambda", ge=0.01, le=100)
    lambda_I_i: float = param(1.0, label="Drug lambda_I_i", help="drug factor: effective I_i = I_i + lambda - 1",
                              ge=-100, le=100)

    @classmethod
    def suggested(cls, gpu: bool = False, **given) -> dict:
        L = given.get("L", DEFAULT_L[bool(gpu)])
        if not isinstance(L, int) or isinstance(L, bool) or L < 4:
            return {"L": DEFAULT_L[bool(gpu)]}
        return {"L": L, "r": default_radius(L)}

    @classmethod
    def options(cls, name: str, values: dict) -> tuple | None:
        if name == "L":
            return (64, 128, 256, 512, 1024, 2048, 4096)
        return None

    @pydantic.model_validator(mode="after")
    def _radius_fits(self):
        if self.r > self.L // 2:
            raise ParameterError("r", f"must be an integer in [1, L/2] = [1, {self.L // 2}] for L = {self.L}; "
                                      f"got {self.r!r}")
        return self

    # ---- effective values (equations 8.4 and 8.5) -----------------------------------------------------
    def effective(self) -> dict[str, dict[str, float]]:
        """Base and drug-modified values per type: {"e": {"A": ..., "tau": ..., "I": ..., "n": ...}, "i": ...}."""
        return {
            "e": {"A": self.A_e / self.lambda_A_e, "tau": self.tau_e / self.lambda_tau_e,
                  "I": self.I_e - self.lambda_I_e + 1.0, "n": self.n_e},
            "i": {"A": self.A_i * self.lambda_A_i, "tau": self.tau_i * self.lambda_tau_i,
                  "I": self.I_i + self.lambda_I_i - 1.0, "n": self.n_i},
        }
