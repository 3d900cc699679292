"""The models of an engine emitted earlier (``nfacep verilog``), built ahead of the
simulations that run them, so that many later simulations (``nfacep regress``'s Spark tasks)
reuse them: the engine alone, the batch harness around it (:mod:`nfacep.sim.build`) or the
native model (:mod:`nfacep.sim.native`).
"""

from __future__ import annotations

import os
from pathlib import Path

from nfacep.errors import UsageError

from .build import build_model, environment, read_sidecar, ready
from .harness import HARNESS_TOP, harness_verilog
from .native import build_native
from .sdram import with_chip

__all__ = ["prebuild"]


def prebuild(
    engine: str | os.PathLike,
    *,
    simulator: str = "icarus",
    build_dir: str | os.PathLike | None = None,
    waves: bool = False,
    batch_depth: int | None = None,
    native: bool = False,
) -> Path:
    """Build the simulator model of an emitted engine now, or find it already built: the
    batch harness's with a memory of ``batch_depth`` tuples around it (what a
    :class:`~nfacep.sim.Simulation` with the same ``batch_depth`` runs), or, when None, the
    engine alone (what ``mode="cycle"`` runs).

    ``engine`` is a Verilog file written by ``nfacep verilog`` (or
    :func:`nfacep.hdl.engine.write_verilog`), with its sidecar ``.json`` beside it (the sidecar
    names the top module). The model is built into the build cache ``build_dir`` (resolved by
    :func:`~nfacep.sim.build.build_cache`) under a folder keyed by the Verilog's content, the
    simulator, the wave setting and the cocotb version, exactly as a simulation builds it: a
    later :class:`~nfacep.sim.Simulation` with ``engine=engine`` and the same ``simulator`` and
    ``build_dir`` (with ``waves`` given iff ``waves`` is true here) reuses the model instead of
    building it, and so does a second :func:`prebuild` of the same Verilog (under a file lock,
    so concurrent callers build once).

    With ``native`` (Verilator only, ``batch_depth`` required) it builds the native model
    (:mod:`nfacep.sim.native`) a ``mode="native"`` simulation runs, and returns its folder.

    Returns the model's build folder inside the cache. Raises :class:`SimulatorMissing` when
    the simulator is not installed (saying how to install it), :class:`UsageError` for an
    unknown simulator or an unreadable engine or sidecar, and :class:`SimulationError` when the
    build fails (with the end of its log).
    """
    cache = ready(simulator, build_dir)
    path, sidecar = read_sidecar(engine)
    path, sidecar = with_chip(path, sidecar, cache / "sdram", cache)  # --store sdram
    top, harness = sidecar["top"], None
    if batch_depth is not None:
        top, harness = HARNESS_TOP, harness_verilog(sidecar, batch_depth)
    cache.mkdir(parents=True, exist_ok=True)
    if native:
        if simulator != "verilator" or harness is None:
            raise UsageError(
                "a native model is built by Verilator around the batch harness: "
                "give simulator='verilator' and a batch_depth"
            )
        return build_native(path, sidecar, harness, cache, waves).parent.parent
    with environment(simulator, cache):
        return build_model(simulator, path, top, cache, waves, harness=harness)
