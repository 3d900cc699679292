"""The options of a simulation (:class:`SimOptions`: simulator, mode, traffic, waves, build
cache, an engine emitted earlier) checked once, and the testbench each mode runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from nfacep.errors import UsageError

from . import build
from .harness import check_depth
from .launch import check_waves

#: Traffic patterns of the testbench (see :class:`nfacep.sim.testbench.Traffic`).
TRAFFIC = ("random", "full")


#: How the testbench feeds the engine: ``batch``, a Verilog harness streams batches of tuples
#: with Python once per batch (:mod:`nfacep.sim.harness`); ``cycle``, cocotb drives every
#: cycle (:mod:`nfacep.sim.testbench`); ``native`` (Verilator only), the batch harness driven
#: by a C++ main, no Python while it runs (:mod:`nfacep.sim.native`).
MODES = ("batch", "cycle", "native")


TESTBENCH_MODULE = {"batch": "nfacep.sim.batch_testbench", "cycle": "nfacep.sim.testbench"}


@dataclass(frozen=True)
class SimOptions:
    """How :class:`~.runner.Simulation` simulates the emitted engine, checked once when made.

    ``simulator`` (:data:`~nfacep.sim.build.SIMULATORS`) builds and runs it. ``mode``
    (:data:`MODES`) is how the testbench feeds it: ``"batch"`` (the default) through the
    Verilog harness of :mod:`nfacep.sim.harness`, Python waking once per batch of tuples;
    ``"cycle"`` with cocotb driving every clock cycle; ``"native"`` (Verilator only) through
    the same harness driven by a C++ main (:mod:`nfacep.sim.native`). All check the same
    contract and give the same records. ``batch_depth`` is the harness's batch memory in
    tuples (a power of two; default :func:`~nfacep.sim.harness.depth_for` the input): each
    depth is a build of its own, so a caller that simulates many inputs with one engine (and
    prebuilds it) names one.
    ``seed`` seeds the testbench's random input gaps and output stalls; ``traffic="full"``
    turns them off (valid and ready always high) to measure throughput. ``waves`` names a
    waveform file to write, for GTKWave or Surfer (FST with Icarus, VCD with Verilator, whose
    FST writer needs liblz4 headers). ``build_dir`` is the folder caching simulator models
    (:func:`~nfacep.sim.build.build_cache`): one build per distinct Verilog, simulator and wave
    setting. ``check`` also runs the reference matcher and compares every record as it
    arrives; a difference sets the result's ``failure``. ``engine`` simulates a Verilog file
    emitted earlier by ``nfacep verilog`` (its sidecar ``.json`` beside it) instead of emitting
    one; its parameters must be the ones :meth:`~.runner.Simulation.run` is given.
    ``timeout_cycles`` bounds the run (default: generous for the input's size). ``keep_run``
    keeps the run folder (inputs, records, the simulator's log) in the cache; it is kept anyway
    when the run fails.
    ``image`` (a programmable engine only) names a file of the configuration port's words
    (hexadecimal, one a line, :func:`nfacep.image.port_words`) to load before the tuples
    instead of the load of the query's image (:func:`~.contract.configuration`): a caller that
    makes the load once (``regress``, on the driver) hands it to every simulation.

    Raises :class:`UsageError` for an unknown simulator, mode or traffic, a batch depth that is
    not a power of two from 16 to ``2**24``, the native mode without Verilator, or a waveform
    file that cannot be written.
    """

    simulator: str = "icarus"
    seed: int = 0
    traffic: str = "random"
    waves: str | None = None
    build_dir: str | os.PathLike | None = None
    check: bool = False
    timeout_cycles: int | None = None
    engine: str | None = None
    keep_run: bool = False
    mode: str = "batch"
    batch_depth: int | None = None
    image: str | None = None

    def __post_init__(self):
        if self.mode not in MODES:
            raise UsageError(
                f"unknown simulation mode {self.mode!r}: choose one of {', '.join(MODES)}"
            )
        check_depth(self.batch_depth)
        if self.simulator not in build.SIMULATORS:
            raise UsageError(
                f"unknown simulator {self.simulator!r}: choose one of {', '.join(build.SIMULATORS)}"
            )
        if self.mode == "native" and self.simulator != "verilator":
            raise UsageError(
                "the native mode is a Verilator model with a C++ main: use "
                "--simulator verilator (or --mode batch with Icarus)"
            )
        if self.traffic not in TRAFFIC:
            raise UsageError(
                f"unknown traffic {self.traffic!r}: choose one of {', '.join(TRAFFIC)}"
            )
        check_waves(self.waves, self.simulator)
