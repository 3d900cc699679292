"""Running a testbench in a run folder: the simulator started on the cocotb testbench
(:func:`run_testbench`) with its progress watched, its failure read back, the words files
written and read, and the waveforms checked and delivered.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from pathlib import Path

from nfacep.errors import UsageError
from nfacep.output import check_outputs

from . import build
from .build import TIMESCALE, SimulationError
from .contract import ContractError
from .records import CONFIG_ENV

#: Waveform format each simulator writes (Verilator's FST writer needs liblz4 headers).
WAVE_FORMAT = {"icarus": "fst", "verilator": "vcd"}


def check_waves(waves: str | None, simulator: str) -> None:
    """Before a simulation: ``--waves`` names a file that can be written, in the format the
    simulator writes (a UsageError if not; nothing for None)."""
    if waves is None:
        return
    check_outputs([waves], what="--waves")
    suffix = Path(waves).suffix.lower().lstrip(".")
    if suffix in ("vcd", "fst") and suffix != WAVE_FORMAT[simulator]:
        raise UsageError(
            f"{waves}: {simulator} writes {WAVE_FORMAT[simulator].upper()} "
            f"waveforms; name the file .{WAVE_FORMAT[simulator]}"
        )


#: The file the batch and native harnesses append the tuples done to, a line per batch.
PROGRESS_FILE = "progress.txt"


#: Seconds between two looks at it.
PROGRESS_EVERY = 0.5


@contextlib.contextmanager
def _watch(path: Path, report):
    """Call ``report`` with the last count in ``path`` whenever it grew, from a thread, while
    the block runs, and once more after it (nothing without ``report``)."""
    if report is None:
        yield
        return
    stop = threading.Event()
    told = 0

    def look() -> None:
        nonlocal told
        try:
            lines = path.read_text(encoding="ascii").split()
        except OSError:
            return
        done = max((int(x) for x in lines if x.isdigit()), default=0)
        if done > told:
            told = done
            report(done)

    def loop() -> None:
        while not stop.wait(PROGRESS_EVERY):
            look()

    thread = threading.Thread(target=loop, daemon=True, name="nfacep-sim-progress")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        look()


def run_testbench(
    simulator: str,
    model: Path,
    run_dir: Path,
    top: str,
    module: str,
    config: Path,
    *,
    waves: bool = False,
    plusargs=(),
    seed: int = 0,
) -> None:
    """Run the cocotb test ``module`` on the built ``model`` (its top ``top``) in ``run_dir``,
    with ``config`` named by :data:`~nfacep.sim.records.CONFIG_ENV`; with ``waves``, the
    waveform goes to ``run_dir/waves.fst`` (Icarus) or ``.vcd`` (Verilator). What the test
    writes (results, ``failure.json``) is left in ``run_dir``; a simulator that cannot run is
    a :class:`SimulationError`."""
    from cocotb_tools.runner import get_runner

    log = run_dir / "sim.log"
    wave_file = run_dir / f"waves.{WAVE_FORMAT[simulator]}"
    plusargs = list(plusargs)
    if waves and simulator == "icarus":
        plusargs.insert(0, f"+dumpfile_path={wave_file}")
    test_args = ["--trace-file", str(wave_file)] if waves and simulator == "verilator" else []
    try:
        get_runner(simulator).test(
            test_module=module,
            hdl_toplevel=top,
            hdl_toplevel_lang="verilog",
            build_dir=model,
            test_dir=run_dir,
            extra_env={CONFIG_ENV: str(config)},
            waves=waves,
            plusargs=plusargs,
            test_args=test_args,
            timescale=TIMESCALE,
            results_xml=str(run_dir / "results.xml"),
            log_file=log,
            seed=seed,
        )
    except SystemExit:
        pass  # the runner exits on a failed test or simulator; the files say why
    except (RuntimeError, ValueError) as exc:
        raise SimulationError(
            f"running the {simulator} simulation failed ({exc}); "
            f"the log {log} ends with:\n{build.tail(log)}"
        ) from None


def deliver_waves(waves: str, run_dir: Path, simulator: str) -> str:
    """Copy the run's waveform to ``waves`` (whole or not at all); returns ``waves``."""
    produced = run_dir / f"waves.{WAVE_FORMAT[simulator]}"
    if not produced.is_file() or produced.stat().st_size == 0:
        raise SimulationError(f"the {simulator} simulation wrote no waveform ({produced})")
    tmp = Path(waves).with_name(f".nfacep-{os.getpid()}-{Path(waves).name}")
    try:
        shutil.copyfile(produced, tmp)
        os.replace(tmp, waves)
    except BaseException:  # an error, Ctrl-C or SIGTERM: no temporary file left
        tmp.unlink(missing_ok=True)
        raise
    return waves


def write_words(path, words: list[int]) -> None:
    """The configuration port's ``words`` to ``path``, one hexadecimal word a line (what
    :attr:`SimOptions.image` names)."""
    with open(path, "w", encoding="ascii") as f:
        f.writelines(f"{w:03x}\n" for w in words)


def read_words(path) -> list[int]:
    """The words :func:`write_words` wrote; a ContractError when it did not."""
    try:
        with open(path, encoding="ascii") as f:
            return [int(line, 16) for line in f if line.strip()]
    except (OSError, ValueError) as exc:
        raise ContractError(f"cannot read the configuration words in {path}: {exc}") from None


def _read_failure(path: Path) -> dict | None:
    """The testbench's ``failure.json``: ``kind`` (``mismatch``: records differ from the
    model's; ``error``: anything else) and ``message``; None when it did not fail."""
    if not path.is_file():
        return None
    try:
        failure = json.loads(path.read_text(encoding="utf-8"))
        return {"kind": str(failure["kind"]), "message": str(failure["message"])}
    except (ValueError, KeyError, TypeError) as exc:
        return {"kind": "error", "message": f"unreadable failure report ({exc})"}
