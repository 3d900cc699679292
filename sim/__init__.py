"""Simulation of the generated engine under cocotb (DESIGN.md §1, §5: ``nfacep sim``).

- :func:`run` (:mod:`nfacep.sim.runner`): emit the engine's Verilog, build it with Icarus Verilog or
  Verilator, stream tuples through it and write its matches like ``nfacep match``;
- :func:`prebuild`: build (or find in the cache) the simulator model of an engine emitted
  earlier, so that later ``run(..., engine=...)`` calls reuse it; :func:`build_cache` names
  the folder caching those builds;
- :mod:`nfacep.sim.testbench`: the cocotb testbench (stream driver, monitor, in-order checker),
  which runs inside the simulator;
- :mod:`nfacep.sim.cli`: the ``nfacep sim`` subcommand.

Importing :mod:`nfacep.sim` is cheap: the runner (and with it the compiler and cocotb's runner) is
loaded on first use of one of its names.
"""

from __future__ import annotations

import importlib

__all__ = [
    "ICARUS_BUILD_ARGS",
    "SIMULATORS",
    "TIMESCALE",
    "ContractError",
    "SimResult",
    "SimulationError",
    "SimulatorMissing",
    "build_cache",
    "prebuild",
    "run",
    "simulator_available",
]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module(".runner", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
