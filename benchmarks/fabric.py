"""Shared by the paper-figure benchmarks: build any matcher on a board and read its cost.

``nfacep build`` (:func:`nfacep.boards.build`) builds the whole engine. The paper's Figures 4, 15,
16 and 17 measure bare automata instead, so :func:`build_design` takes any top through the same
flow, :func:`nfacep.boards.run_flow` (Yosys, its ``stat -json`` and nextpnr's ``--report`` read as
``nfacep build`` reads them), stops after place-and-route (no bitstream packing) and runs it in
a child process that is killed after ``timeout`` seconds. :class:`MatcherTop` is the harness:
:class:`nfacep.boards.top.RandomTupleSource` ▸ decoder ▸ matcher ▸
:class:`nfacep.boards.top.LedSink`, so every input varies and every match bit reaches a pin.
"""

from __future__ import annotations

import csv
import json
import multiprocessing
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from amaranth.hdl import Elaboratable, Module
from amaranth.lib import data, io, wiring

from nfacep.boards import Board, run_flow
from nfacep.boards.top import LedSink, RandomTupleSource, board_leds
from nfacep.hdl.decoder import PredicateDecoder
from nfacep.hdl.layout import tuple_layout
from nfacep.hdl.stream import StreamBuffer

__all__ = [
    "MERGE",
    "NFACEP",
    "MatcherTop",
    "build_design",
    "build_report",
    "cell",
    "design_row",
    "earlier_rows",
    "output_arguments",
    "read_csv",
    "save_rows",
    "write_csv",
    "write_merged",
]

HERE = os.path.dirname(os.path.abspath(__file__))
#: ``nfacep`` as the Python running the script has it (its environment's, whatever PATH says):
#: the command line of a subprocess that runs it
NFACEP = [sys.executable, "-m", "nfacep.cli"]
#: ``--merge`` of a benchmark whose rows are (i, variant)
MERGE = "keep the other variants' rows of an existing --csv in it and the plot"


class MatcherTop(Elaboratable):
    """``RandomTupleSource ▸ [PredicateDecoder] ▸ matcher ▸ LedSink`` on the board's LEDs.

    ``matcher`` has the stream interface of :class:`nfacep.hdl.nfa.NfaMatcher` (a predicate vector
    in, fed by a shared :class:`nfacep.hdl.decoder.PredicateDecoder`) or of
    :class:`nfacep.hdl.unshared.UnsharedNfaMatcher` (the tuple in, no decoder). With
    ``registered``, the predicate vector passes a pipeline register between decoder and
    matcher, as in the engine (where the decoder feeds a FIFO): synthesis then cannot fold the
    decoder's logic into each state's.
    """

    def __init__(self, nfa, matcher, *, registered: bool = False):
        self.nfa = nfa
        self.matcher = matcher
        self.registered = registered

    def elaborate(self, platform):
        m = Module()
        nfa, matcher = self.nfa, self.matcher
        m.submodules.source = source = RandomTupleSource(tuple_layout(nfa.program.schema))
        m.submodules.matcher = matcher
        inputs = matcher.i_stream.payload
        if "tuple" in inputs.shape().members:
            m.d.comb += inputs.tuple.eq(source.o_stream.payload)
        else:
            m.submodules.decoder = decoder = PredicateDecoder(nfa)
            m.d.comb += decoder.tuple.eq(source.o_stream.payload)
        if self.registered:
            m.submodules.register = register = StreamBuffer(len(decoder.predicates))
            m.d.comb += [
                register.i_stream.valid.eq(source.o_stream.valid),
                source.o_stream.ready.eq(register.i_stream.ready),
                register.i_stream.payload.eq(decoder.predicates),
                matcher.i_stream.valid.eq(register.o_stream.valid),
                register.o_stream.ready.eq(matcher.i_stream.ready),
                inputs.predicates.eq(register.o_stream.payload),
            ]
        else:
            if "predicates" in inputs.shape().members:
                m.d.comb += inputs.predicates.eq(decoder.predicates)
            m.d.comb += [
                matcher.i_stream.valid.eq(source.o_stream.valid),
                source.o_stream.ready.eq(matcher.i_stream.ready),
            ]
        leds = board_leds(platform)
        record = matcher.o_stream.payload.shape()
        m.submodules.sink = sink = LedSink(data.StructLayout(dict(record.members)), leds=len(leds))
        wiring.connect(m, matcher.o_stream, sink.i_stream)
        for i, port in enumerate(leds):
            m.submodules[f"led{i}"] = buf = io.Buffer("o", port)
            m.d.comb += buf.o.eq(sink.leds[i])
        return m


def _build(
    make_top,
    board: Board,
    work: str,
    target_mhz: float | None,
    script_after_read: str | None,
    seed: int | None = None,
) -> dict:
    """The build itself (in the child process): a result dict."""
    flow = run_flow(
        make_top,
        board,
        work,
        target_mhz=target_mhz,
        script_after_read=script_after_read,
        pack=False,
        seed=seed,
    )
    result: dict = {"status": flow.status, "seconds": flow.seconds}
    if flow.usage is not None:
        result["yosys"] = {
            "luts": flow.usage.luts,
            "ffs": flow.usage.ffs,
            "brams": flow.usage.brams,
        }
    if flow.status != "ok":
        result["message"] = flow.message
        return result
    result.update({k: v["used"] for k, v in flow.resources.items()})
    result["fmax_mhz"] = min(flow.fmax_mhz.values(), default=None)
    return result


def _child(make_top, board, out_dir, target_mhz, script_after_read, seed=None):
    os.setsid()  # its own process group: a timeout kills the toolchain with it
    work = os.path.join(out_dir, "toolchain")
    os.makedirs(work, exist_ok=True)
    try:
        result = _build(make_top, board, work, target_mhz, script_after_read, seed)
    except Exception as err:  # reported, not raised: the sweep goes on
        result = {"status": "error", "message": f"{type(err).__name__}: {err}"}
    with open(os.path.join(out_dir, "result.json"), "w", encoding="utf-8") as f:
        json.dump(result, f)


def build_design(
    make_top,
    board: Board,
    out_dir: str,
    *,
    target_mhz: float | None = None,
    script_after_read: str | None = None,
    timeout: float | None = None,
    seed: int | None = None,
) -> dict:
    """Build ``make_top()`` for ``board`` in ``out_dir`` (Yosys, then nextpnr); the result.
    ``seed``: nextpnr's placement seed (``--seed``), or its default.

    ``make_top`` is called in a child process, so a design's elaboration counts against
    ``timeout`` too. The result has ``status`` (``ok``, ``timeout``, or a failed
    :attr:`nfacep.boards.FlowResult.status`: ``does not fit``, ``synthesis failed``,
    ``place-and-route failed``; ``error``, ``crashed …``), ``message`` when not ``ok``, ``luts``,
    ``ffs``, ``brams`` (nextpnr's counts) and ``fmax_mhz`` when ``ok``, ``yosys`` (the synthesis
    counts), ``seconds`` per step and ``wall_s``.
    """
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "result.json")
    if os.path.exists(path):
        os.unlink(path)
    start = time.monotonic()
    proc = multiprocessing.get_context("fork").Process(
        target=_child, args=(make_top, board, out_dir, target_mhz, script_after_read, seed)
    )
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        os.killpg(proc.pid, signal.SIGKILL)
        proc.join()
        return {"status": "timeout", "wall_s": round(time.monotonic() - start, 1)}
    try:
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
    except OSError:
        result = {"status": f"crashed (exit code {proc.exitcode})"}
    result["wall_s"] = round(time.monotonic() - start, 1)
    return result


def design_row(result: dict, board: Board) -> dict:
    """A CSV row's measured columns from a :func:`build_design` result: ``status``, nextpnr's
    ``luts``, ``ffs``, ``brams``, ``fmax_mhz``, ``wall_s``, Yosys's ``yosys_luts`` and
    ``yosys_ffs``, ``message`` when not ``ok``, and ``luts_pct`` and ``ffs_pct`` of ``board``."""
    row = {k: result.get(k) for k in ("status", "luts", "ffs", "brams", "fmax_mhz", "wall_s")}
    if result.get("yosys"):
        row["yosys_luts"] = result["yosys"]["luts"]
        row["yosys_ffs"] = result["yosys"]["ffs"]
    if result["status"] != "ok":
        row["message"] = result.get("message", "")
    if row["luts"] is not None:
        row["luts_pct"] = round(100 * row["luts"] / board.luts, 3)
        row["ffs_pct"] = round(100 * row["ffs"] / board.ffs, 3)
    return row


def build_report(nfa, board: Board, out_dir: str, params, **options) -> tuple[dict, float]:
    """``nfacep build`` of ``nfa`` with ``params`` (``options``: :func:`nfacep.boards.build`'s)
    in ``out_dir``: its report, also when timing was missed, and its Fmax (the slowest
    clock's; NaN when nextpnr gave none)."""
    from nfacep.boards import BuildError, build

    try:
        report = build(nfa, board, out_dir, params, **options)
    except BuildError as err:  # timing missed: the numbers are still there
        if err.report is None or not err.report["resources"]:
            raise
        report = err.report
    fmax = min(report["fmax_mhz"].values()) if report["fmax_mhz"] else float("nan")
    return report, fmax


def output_arguments(ap, name: str, *, merge: str, board: str = "ulx3s-85f") -> None:
    """The options of a benchmark that builds a series: ``--board``, ``--csv`` (default
    ``results/NAME.csv``), ``--plot`` (default ``NAME.png``), ``--keep`` and ``--merge`` (what
    it keeps: ``merge``)."""
    ap.add_argument("--board", default=board)
    ap.add_argument("--csv", default=os.path.join(HERE, "results", f"{name}.csv"))
    ap.add_argument("--plot", metavar="PNG", default=os.path.join(HERE, f"{name}.png"))
    ap.add_argument("--keep", metavar="DIR", help="keep the build folders here")
    ap.add_argument("--merge", action="store_true", help=merge)


def cell(row: dict, key: str, fmt: str) -> str:
    """``row[key]`` formatted with ``fmt`` for a printed table, ``-`` when it has none."""
    v = row.get(key)
    return "-" if v is None or v == "" else format(v, fmt)


def earlier_rows(path: str, merge: bool) -> list[dict]:
    """The rows of the CSV at ``path`` that ``--merge`` keeps: none without it or the file."""
    return read_csv(path) if merge and os.path.exists(path) else []


def write_merged(path: str, old: list[dict], rows: list[dict], key) -> None:
    """``rows`` and those ``old`` rows whose ``key(row)`` none of ``rows`` has, as CSV."""
    done = {key(r) for r in rows}
    write_csv(path, [r for r in old if key(r) not in done] + rows)


def read_csv(path: str) -> list[dict]:
    """Rows written by :func:`write_csv`, numbers as numbers, empty cells left out."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for row in csv.DictReader(f):
            out: dict = {}
            for k, v in row.items():
                if v == "":
                    continue
                try:
                    out[k] = int(v)
                except ValueError:
                    try:
                        out[k] = float(v)
                    except ValueError:
                        out[k] = v
            rows.append(out)
    return rows


def write_csv(path: str, rows: list[dict]) -> None:
    """``rows`` as CSV, the union of their keys as columns, lines ending in ``\n`` as the
    committed files' (the csv module's default is ``\r\n``)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")


def save_rows(
    path: str, rows: list[dict], *, merge: bool, replaced: list[str], order: list[str]
) -> list[dict]:
    """Write ``rows`` to the CSV at ``path``; with ``merge``, keep the rows of an existing file
    whose variant is not in ``replaced``. Rows are sorted by (i, variant in ``order``)."""
    import os

    if merge and os.path.exists(path):
        old = [r for r in read_csv(path) if r["variant"] not in replaced]
        rows = sorted(old + rows, key=lambda r: (r["i"], order.index(r["variant"])))
    write_csv(path, rows)
    return rows
