"""Simulation of the generated engine under cocotb (``nfacep sim``).

- :class:`Simulation` (:mod:`nfacep.sim.runner`): the simulated gateware as a back-end
  (:class:`nfacep.backend.Backend`): emit the engine's Verilog, build it with Icarus Verilog or
  Verilator, stream tuples through it and return its matches as a :class:`SimResult`
  (or, with :meth:`Simulation.stream`, take the stream in pieces and give a :class:`SimRun`
  whose records are read back a chunk at a time);
- :func:`prebuild` (:mod:`nfacep.sim.models`): build (or find in the cache) the simulator model
  of an engine emitted earlier, so that later ``Simulation(SimOptions(engine=...))`` runs
  reuse it; :func:`build_cache` names the folder caching those builds;
- :mod:`nfacep.sim.harness` and :mod:`nfacep.sim.batch_testbench`: the batch mode (the
  default), a Verilog testbench around the engine that makes its own clock and streams whole
  batches of tuples from a file, and the cocotb test that wakes once per batch;
- :mod:`nfacep.sim.testbench`: the per-cycle cocotb testbench (stream driver, monitor,
  in-order checker), which runs inside the simulator;
- :mod:`nfacep.sim.cli`: the ``nfacep sim`` subcommand.

Importing :mod:`nfacep.sim` is cheap: the runner (and with it the compiler and cocotb's
runner) is loaded on first use of one of its names.
"""

from __future__ import annotations

from nfacep.lazy import lazy_attributes

#: Where each public name lives.
_WHERE = {
    "ICARUS_BUILD_ARGS": "build",
    "SIMULATORS": "build",
    "TIMESCALE": "build",
    "SimulationError": "build",
    "SimulatorMissing": "build",
    "build_cache": "build",
    "checked_cache": "build",
    "prebuild": "models",
    "simulator_available": "build",
    "ContractError": "contract",
    "SimOptions": "options",
    "SimResult": "runner",
    "SimRun": "runner",
    "Simulation": "runner",
}

__all__ = sorted(_WHERE)


__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
