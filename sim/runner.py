"""The simulated gateware as a back-end: the emitted engine under cocotb.

:class:`Simulation` is a :class:`~nfacep.backend.Backend` (what ``nfacep sim`` runs): it emits
the engine as ``nfacep verilog`` does (Verilog plus its JSON sidecar), or takes one emitted
earlier, checks that the engine keeps its port and record contract (:mod:`.contract`), packs
the tuples (:func:`nfacep.wire.pack`), builds the simulator model once per distinct Verilog
(:mod:`nfacep.sim.build`), runs the testbench (:mod:`nfacep.sim.testbench`) and decodes the
engine's records with :mod:`nfacep.wire` into a :class:`SimResult`.

:meth:`Simulation.stream` does the same without holding the stream: it takes the tuples in
pieces (each packed and appended to the simulator's input file as it comes) and gives a
:class:`SimRun`, whose :meth:`SimRun.chunks` decode the records file a chunk at a time,
column-wise (:meth:`nfacep.result.Result.from_columns`). :meth:`Simulation.run` is that with
one piece and one chunk. The batch and native harnesses read their input a batch at a time and
write each record as the engine emits it, so only a checked run (``check``: the reference
matcher's records, compared one by one in the testbench) holds them all.

Beside it, one module per job: the options (:mod:`.options`), the engine's contract read from
its sidecar (:mod:`.contract`), and running a testbench in its run folder (:mod:`.launch`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nfacep import wire
from nfacep.errors import UsageError
from nfacep.io.tuples import Tuples
from nfacep.nfa import Nfa
from nfacep.params import EngineParams
from nfacep.result import Result
from nfacep.settings import ParamValues

from . import build
from .build import SimulationError
from .contract import ContractError, check_sidecar, configuration, switch_words
from .harness import HARNESS_TOP, depth_for, harness_verilog, switch_plusargs
from .launch import (
    PROGRESS_FILE,
    _read_failure,
    _watch,
    deliver_waves,
    read_words,
    run_testbench,
    write_words,
)
from .options import TESTBENCH_MODULE, SimOptions
from .records import RECORDS_HEX, InOrderChecker, read_hex, write_records
from .sdram import check_errors, with_chip

__all__ = ["RECORD_CHUNK", "SimResult", "SimRun", "Simulation"]


@dataclass
class SimResult(Result):
    """What one simulation gave: a :class:`~nfacep.result.Result`, plus how the run went."""

    simulator: str = "icarus"
    mode: str = "batch"
    seed: int = 0
    traffic: str = "random"
    cycles: int = 0  #: clock cycles from the end of reset to the last transfer
    tuples_per_cycle: float | None = None  #: input tuples per cycle, first to last transfer
    records: list[wire.Record] = field(default_factory=list)  #: as they arrived
    waves: str | None = None  #: the waveform file written, if any

    backend = "simulation"

    def details(self) -> dict:
        tpc = self.tuples_per_cycle
        return {
            "simulator": self.simulator,
            "mode": self.mode,
            "seed": self.seed,
            "traffic": self.traffic,
            "cycles": self.cycles,
            "tuples_per_cycle": None if tpc is None else round(tpc, 4),
            "records": len(self.records),
            "counters": self.counters,
        }

    def note(self) -> str:
        rate = (
            "" if self.tuples_per_cycle is None else f", {self.tuples_per_cycle:.3f} tuples/cycle"
        )
        return f"{self.simulator} ({self.mode}), {self.cycles} cycles{rate}"


class Simulation:
    """The emitted engine, simulated as ``options`` (a :class:`SimOptions`; default its
    defaults) say.

    ``progress`` (batch and native modes) is called from a thread with the number of tuples
    simulated so far as each batch ends (and once at the end), about twice a second at most.
    """

    def __init__(self, options: SimOptions | None = None, *, progress=None):
        self.options = SimOptions() if options is None else options
        self.progress = progress

    def run(
        self, nfa: Nfa, tuples: Tuples, params: EngineParams, values: ParamValues | None = None
    ) -> SimResult:
        """Simulate the engine of ``nfa`` with ``params`` on ``tuples``; with the runtime
        parameters' ``values``: the engine starts with their initial values, and each switch
        is written to its ``i_params`` before the tuple it applies to.

        The whole run at once: :meth:`stream` with one piece and its records read as one
        chunk, kept as :attr:`SimResult.records`.

        Raises :class:`~nfacep.sim.build.SimulatorMissing` when the simulator is not installed
        (saying how to install it), :class:`ContractError` when the engine breaks its contract
        and :class:`SimulationError` when the simulation fails (a build failure, a stuck
        engine)."""
        with self._launch(
            nfa, [tuples], params, values, model=tuples if self.options.check else None
        ) as ran:
            (result,) = ran.chunks(None, records=True)
            result.failure = ran.failure
            return result

    def stream(
        self,
        nfa: Nfa,
        pieces: Iterable[Tuples],
        params: EngineParams,
        values: ParamValues | None = None,
    ) -> contextlib.AbstractContextManager[SimRun]:
        """:meth:`run` on a stream given in pieces, its result given back in chunks, so that
        neither the stream nor its matches are ever held whole: a context manager that
        writes each piece's packed tuples to the run folder as it comes (``pieces``: the
        stream in order, its tuples numbered 0.. across them), runs the simulator (which reads
        its input batch by batch and writes each record as the engine emits it) and gives a
        :class:`SimRun`, whose :meth:`SimRun.chunks` decode the records a chunk at a time.
        The run folder is removed when the block ends (kept with ``keep_run`` or a failure).

        ``check`` (a comparison with the reference matcher, which takes the whole stream) is
        :meth:`run`'s alone: a UsageError here. Raises as :meth:`run` does."""
        if self.options.check:
            raise UsageError(
                "a simulation checked against the reference matcher takes the "
                "whole stream at once: use run(), not stream()"
            )
        return self._launch(nfa, pieces, params, values)

    @contextlib.contextmanager
    def _launch(
        self,
        nfa: Nfa,
        pieces: Iterable[Tuples],
        params: EngineParams,
        values: ParamValues | None,
        model: Tuples | None = None,
    ) -> Iterator[SimRun]:
        cache = build.ready(self.options.simulator, self.options.build_dir)
        cache.mkdir(parents=True, exist_ok=True)
        run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=cache))
        keep = False  # (a failure while the inputs are written leaves nothing worth keeping)
        try:
            engine_v, sidecar = self._engine(nfa, params, run_dir, values)
            # with --store sdram: the engine and its chip's model, under one top
            engine_v, sidecar = with_chip(engine_v, sidecar, cache / "sdram", cache)
            n = self._write_tuples(nfa, pieces, run_dir / "tuples.hex")
            config = self._write_inputs(nfa, n, model, params, sidecar, run_dir, values)
            keep = True
            top, harness = sidecar["top"], None
            if self.options.mode in ("batch", "native"):
                top, harness = HARNESS_TOP, harness_verilog(sidecar, self._depth(n))
            with _watch(run_dir / PROGRESS_FILE, self.progress):
                if self.options.mode == "native":
                    from .native import build_native, run_native

                    executable = build_native(
                        engine_v, sidecar, harness, cache, bool(self.options.waves)
                    )
                    run_native(
                        executable,
                        run_dir,
                        json.loads(config.read_text(encoding="utf-8")),
                        waves=str(run_dir / "waves.vcd") if self.options.waves else None,
                    )
                else:
                    with build.environment(self.options.simulator, cache):
                        model_dir = build.build_model(
                            self.options.simulator,
                            engine_v,
                            top,
                            cache,
                            bool(self.options.waves),
                            harness=harness,
                        )
                        self._simulate(model_dir, run_dir, top, config)
            ran = SimRun(self, nfa, params, values, run_dir, n, sidecar)
            yield ran
            keep = self.options.keep_run or ran.failure is not None
        finally:
            if not keep:
                shutil.rmtree(run_dir, ignore_errors=True)

    def _depth(self, n: int) -> int:
        return self.options.batch_depth or depth_for(n)

    # --- the engine ------------------------------------------------------------------------

    def _engine(
        self, nfa: Nfa, params: EngineParams, run_dir: Path, values: ParamValues | None
    ) -> tuple[Path, dict]:
        """The Verilog to simulate and its sidecar, checked against the query, ``params`` and
        the runtime parameters' initial ``values``."""
        if self.options.engine is None:
            if params.engine == "programmable":
                from nfacep.hdl.programmable import write_verilog
            else:
                from nfacep.hdl.engine import write_verilog

            path = run_dir / "engine.v"
            returned = write_verilog(nfa, str(path), params, values=values)
            _, sidecar = build.read_sidecar(path)
            if sidecar != json.loads(json.dumps(returned)):
                raise ContractError(
                    "the sidecar written beside the Verilog is not the one write_verilog returned"
                )
        else:
            path, sidecar = build.read_sidecar(self.options.engine)
            have = EngineParams.from_dict(
                sidecar.get("parameters"), source=f"{self.options.engine}'s sidecar"
            )
            if have != params:
                raise UsageError(
                    f"{self.options.engine} was emitted with other parameters: "
                    f"{', '.join(have.differences(params))}"
                )
            initial = sidecar.get("runtime_parameters", {}).get("initial")
            if (
                values
                and sidecar.get("engine") != "programmable"
                and initial != values.as_dict()["initial"]
            ):
                raise UsageError(
                    f"{self.options.engine} was emitted with other runtime parameter "
                    f"values ({initial}); give the same --param values"
                )
        check_sidecar(sidecar, nfa)
        return path, sidecar

    @staticmethod
    def _write_tuples(nfa: Nfa, pieces: Iterable[Tuples], path: Path) -> int:
        """The pieces' packed tuples appended to ``path`` as they come (one hexadecimal word a
        line, :func:`nfacep.wire.hex_lines`); returns how many."""
        n = 0
        with open(path, "wb") as f:
            for piece in pieces:
                try:
                    f.write(wire.hex_lines(nfa.program.schema, piece))
                except ValueError as exc:
                    raise ContractError(f"cannot pack the tuples: {exc}") from None
                n += piece.n
        return n

    def _write_inputs(
        self,
        nfa: Nfa,
        n: int,
        model: Tuples | None,
        params: EngineParams,
        sidecar: dict,
        run_dir: Path,
        values: ParamValues | None = None,
    ) -> Path:
        """The testbench's inputs besides the tuples in ``run_dir`` (with ``model``, the
        reference matcher's records of those tuples, to check against); returns its
        ``config.json``."""
        expected = None
        if model is not None:
            from nfacep.reference import matcher as reference

            matched = reference.run(nfa, model, params, values=values)
            write_records(run_dir / "expected.txt", matched.records(nfa, model))
            expected = "expected.txt"
        config = {
            "sidecar": sidecar,
            "tuples": "tuples.hex",
            "expected": expected,
            "results": RECORDS_HEX,
            "stats": "stats.json",
            "failure": "failure.json",
            "seed": self.options.seed,
            "traffic": self.options.traffic,
            "timeout_cycles": self.options.timeout_cycles,
            "depth": self._depth(n),
            "switches": None,
            "switch_count": 0,
            "image": None,
            "image_bytes": 0,
            "progress": PROGRESS_FILE if self.progress else None,
            "n": n,
        }
        if sidecar.get("engine") == "programmable":
            words = (
                configuration(nfa, sidecar, values)
                if self.options.image is None
                else read_words(self.options.image)
            )
            config.update(image="image.hex", image_bytes=len(words))
            write_words(run_dir / "image.hex", words)
        elif values and values.switches:
            config.update(switches="switches.hex", switch_count=len(values.switches))
            with open(run_dir / "switches.hex", "w", encoding="ascii") as f:
                f.writelines(f"{w:x}\n" for w in switch_words(values, sidecar))
        path = run_dir / "config.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        return path

    # --- the run ---------------------------------------------------------------------------

    def _simulate(self, model: Path, run_dir: Path, top: str, config: Path) -> None:
        """Run the testbench on the model; its records, statistics and failure are left in
        ``run_dir``."""
        plusargs = []
        if self.options.mode == "batch":
            plusargs += [
                f"+nfacep_tuples={run_dir / 'batch.hex'}",
                f"+nfacep_records={run_dir / RECORDS_HEX}",
                f"+nfacep_seed={self.options.seed}",
                f"+nfacep_traffic={self.options.traffic}",
                *switch_plusargs(json.loads(config.read_text(encoding="utf-8")), run_dir),
            ]
        run_testbench(
            self.options.simulator,
            model,
            run_dir,
            top,
            TESTBENCH_MODULE[self.options.mode],
            config,
            waves=bool(self.options.waves),
            plusargs=plusargs,
            seed=self.options.seed,
        )


#: Records decoded at a time by :meth:`SimRun.chunks` by default.
RECORD_CHUNK = 1 << 20


class SimRun:
    """A simulation that has run (:meth:`Simulation.stream`): how it went, and its records,
    still in the run folder, read a chunk at a time by :meth:`chunks`.

    Raises :class:`SimulationError` when the testbench failed (anything but records that
    differ from the reference matcher's, which is :attr:`failure`)."""

    def __init__(
        self,
        simulation: Simulation,
        nfa: Nfa,
        params: EngineParams,
        values: ParamValues | None,
        run_dir: Path,
        n: int,
        sidecar: dict,
    ):
        self.simulation, self.nfa, self.params, self.values = simulation, nfa, params, values
        self.run_dir, self.n = run_dir, n
        self.layout = wire.RecordFormat.from_description(sidecar["record"]["fields"])
        failure = _read_failure(run_dir / "failure.json")
        stats_path = run_dir / "stats.json"
        if (failure is not None and failure["kind"] != "mismatch") or not stats_path.is_file():
            self._fail(failure["message"] if failure else "it ran no test")
        self.stats = json.loads(stats_path.read_text(encoding="utf-8"))
        broken = check_errors(self.stats.get("counters", {}))
        if broken is not None:
            self._fail(broken)
        #: set when the records are wrong: they differ from the reference matcher's (found by
        #: the testbench, with ``check``) or break the record rules (found by :meth:`chunks`)
        self.failure: SimulationError | None = None
        if failure is not None:
            self._differ(failure["message"])
        self.waves = None  #: the waveform file written, if any
        if simulation.options.waves:
            self.waves = deliver_waves(
                simulation.options.waves, run_dir, simulation.options.simulator
            )

    @property
    def cycles(self) -> int:
        """Clock cycles from the end of reset to the last transfer."""
        return self.stats.get("cycles", 0)

    def chunks(
        self, rows: int | None = RECORD_CHUNK, *, records: bool = False
    ) -> Iterator[SimResult]:
        """The run's result in chunks of at most ``rows`` records (None: one chunk), in the
        order the engine emitted them: each a :class:`SimResult` of the whole run (its ``n``,
        cycles, counters) holding the matches and drops of those records (their ``seq``
        positions in the whole stream), and the records themselves with ``records``. At least
        one chunk. Records that break the rules (out of order, a drop that matches, a record
        that reports nothing) set :attr:`failure` once the last chunk is read, unless the
        testbench checked them; a record that cannot be this engine's is a
        :class:`ContractError`."""
        sim = self.simulation.options
        checker = None if self.stats.get("checked") else InOrderChecker(None, self.n, keep=False)
        first, last = self.stats.get("first_input_cycle"), self.stats.get("last_input_cycle")
        fields = {
            "counters": self.stats.get("counters", {}),
            "simulator": sim.simulator,
            "mode": sim.mode,
            "seed": sim.seed,
            "traffic": sim.traffic,
            "cycles": self.cycles,
            "waves": self.waves,
            "tuples_per_cycle": None
            if first is None or last is None
            else self.n / (last - first + 1),
        }
        decoded = read_hex(self.run_dir / RECORDS_HEX, self.layout, rows)
        while True:
            try:
                chunk = next(decoded, None)
            except OSError as exc:
                self._fail(f"no records file ({exc})")
            except ValueError as exc:
                self._fail(f"{exc} (x or z bits on o_stream.payload)")
            if chunk is None:
                break
            if checker is not None:
                checker.check(chunk)
            try:
                result = SimResult.from_columns(
                    self.nfa,
                    self.n,
                    chunk,
                    self.params,
                    records=chunk.records() if records else [],
                    **fields,
                )
            except ValueError as err:
                raise ContractError(f"the engine's records: {err}") from None
            result.values = self.values or None
            yield result
        if checker is not None and checker.error_count:
            self._differ(f"{checker.error_count} record(s) differ:\n{checker.report()}")

    def _fail(self, reason: str):
        log = self.run_dir / "sim.log"
        raise SimulationError(
            f"the {self.simulation.options.simulator} simulation failed: {reason}\n"
            f"(log: {log}; its end:\n{build.tail(log)})"
        )

    def _differ(self, message: str) -> None:
        self.failure = SimulationError(
            f"the engine's records differ from the reference matcher's: {message}\n"
            f"(run folder: {self.run_dir})"
        )
