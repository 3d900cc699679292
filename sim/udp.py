"""The UDP board simulated: ``nfacep sim --link udp``.

:class:`UdpSimulation` is a :class:`~nfacep.backend.Backend`: it emits the board's top level
behind the Ethernet PHY (:class:`~nfacep.hdl.eth.top.UdpTop`: the MAC, the UDP link,
the clock-domain crossings and the engine, GMII pins; the bitstream of ``nfacep build --link
udp`` wraps the same top in the ECP5's RGMII pads), builds it with Icarus or Verilator once per
distinct Verilog, and runs :mod:`nfacep.sim.udp_testbench` on it: cocotbext-eth sends the
tuples in TUPLES packets (and runtime parameter switches in PARAMS packets) on the GMII
receive pins at 1 Gb/s with the minimum inter-frame gap, and takes every frame the board
sends. The records come back in RECORDS packets and are decoded exactly as the host
(``nfacep run --udp``) decodes them (:func:`~nfacep.links.host.board_result`), so the match
file equals ``nfacep match``'s. With ``--engine programmable`` the top has the programmable
engine, and the file's image goes first, in LOAD packets (in force from tuple 0), as ``nfacep
run --udp`` loads it.

Unlike the host, the simulated sender does not wait for credit: it sends at line rate, so the
run also measures whether the board keeps up with the line (no ``engine_full``), the tuples and
frames per second it took against the wire's limit, and the latency from each tuple's last
byte on the receive pins to its record's first byte on the transmit pins.
"""

from __future__ import annotations

import bisect
import json
import os
import shutil
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from nfacep import wire
from nfacep.errors import UsageError
from nfacep.io.tuples import Tuples
from nfacep.links.host import BoardResult
from nfacep.links.udp.protocol import FRAME_CLASSES, HEADER_BYTES, line_limit
from nfacep.nfa import Nfa
from nfacep.params import EngineParams
from nfacep.settings import ParamValues

from . import build
from .build import SimulationError
from .contract import ContractError
from .launch import check_waves, deliver_waves, run_testbench
from .sdram import check_errors

__all__ = ["HOST", "UdpSimOptions", "UdpSimResult", "UdpSimulation", "line_limit"]

TOP = "nfacep_udp_top"
TESTBENCH = "nfacep.sim.udp_testbench"
#: The simulated sender's addresses (the board's are ``nfacep build``'s defaults).
HOST = "02:00:00:00:00:01", "192.168.1.1", 40000
#: The simulated host's session id (any would do: the board binds to what RESET carries).
SESSION = 0x6E666163
#: The session id of its LOAD packets (a loader's: their answers are not the session's).
LOADER = SESSION ^ 0xFFFF
#: Nanoseconds a byte takes on GMII at 1 Gb/s, and the link's clock period (125 MHz).
BYTE_NS = 8
CLOCK_NS = 8


@dataclass
class UdpSimResult(BoardResult):
    """What the simulated UDP board did: a board's result (its last STATUS, the records it
    sent), the simulator, and the line's figures (``line``) and the latency (``latency``)."""

    simulator: str = "icarus"
    line: dict = field(default_factory=dict)
    latency: dict = field(default_factory=dict)
    waves: str | None = None

    backend = "simulation"

    def details(self) -> dict:
        from nfacep.links.udp.protocol import STATUS_FIELDS

        board = {k: self.status[k] for k, _ in STATUS_FIELDS}
        if self.values:
            board["values"] = self.values.texts(self.values.unpacked(self.status["values"]))
        return {
            "simulator": self.simulator,
            "link": "udp",
            "board": board,
            "line": self.line,
            "latency_cycles": self.latency,
        }

    def note(self) -> str:
        line = self.line
        text = (
            f"{self.simulator}, UDP board top at 1 Gb/s: {line['frames']} frames, "
            f"{line['tuples_per_s']:,.0f} tuples/s, {line['frames_per_s']:,.0f} frames/s, "
            f"{line['of_line']:.1%} of the line"
        )
        if self.latency:
            text += (
                f"; latency {self.latency['min']}-{self.latency['max']} cycles "
                f"(median {self.latency['median']})"
            )
        return text

    def frame_counters(self) -> str:
        """Every frame counter of the board's last STATUS, as a line of text."""
        from nfacep.links.udp.protocol import FRAME_CLASSES

        return (
            "frames: "
            + ", ".join(f"{c} {self.status[c]}" for c in FRAME_CLASSES)
            + f"; lost {self.status['lost']}, late {self.status['late']}"
        )


@dataclass(frozen=True)
class UdpSimOptions:
    """How :class:`UdpSimulation` simulates the UDP board top, checked once when made.

    ``simulator`` (:data:`~nfacep.sim.build.SIMULATORS`) builds and runs it;
    ``tuples_per_packet``: tuples in each TUPLES packet (default as many as fit a 1,500-byte
    packet and the board's buffer, as the host sends); ``waves``: a waveform file to write;
    ``build_dir``: the folder caching builds; ``check``: also run the reference matcher and set
    the result's ``failure`` when the records differ; ``keep_run``: keep the run folder (it is
    kept anyway on a failure); ``seed``: the seed of the testbench's traffic; ``pcap``: a pcap
    file to write every frame to, both ways (:mod:`nfacep.links.udp.pcap`); ``engine_mhz``: the
    engine's clock (its own domain beside the link's 125 MHz), as the board's PLL gives it
    (default the one ``nfacep build`` chooses, :func:`nfacep.links.udp.top.engine_clock`).
    """

    simulator: str = "icarus"
    tuples_per_packet: int | None = None
    waves: str | None = None
    pcap: str | None = None
    build_dir: str | os.PathLike | None = None
    check: bool = False
    keep_run: bool = False
    seed: int = 0
    engine_mhz: float | None = None

    def __post_init__(self):
        if self.simulator not in build.SIMULATORS:
            raise UsageError(
                f"unknown simulator {self.simulator!r}: choose one of {', '.join(build.SIMULATORS)}"
            )
        if self.tuples_per_packet is not None and self.tuples_per_packet < 1:
            raise UsageError("--tuples-per-packet must be at least 1")
        check_waves(self.waves, self.simulator)


class UdpSimulation:
    """The UDP board top of ``nfacep build --link udp`` under cocotb, as a back-end, simulated
    as ``options`` (a :class:`UdpSimOptions`) say."""

    def __init__(self, options: UdpSimOptions | None = None):
        self.options = UdpSimOptions() if options is None else options

    def packet_size(self, tb: int) -> int:
        """Tuples per TUPLES packet for tuples of ``tb`` bytes; a UsageError when
        ``tuples_per_packet`` does not fit a packet or the board's buffer."""
        from nfacep.hdl.eth.link import CAPACITY
        from nfacep.links.udp.host import max_tuples_per_packet

        per_mtu = max_tuples_per_packet(tb)
        room = CAPACITY // tb
        if self.options.tuples_per_packet is None:
            return min(per_mtu, room)
        if self.options.tuples_per_packet > per_mtu:
            raise UsageError(
                f"--tuples-per-packet {self.options.tuples_per_packet}: at most {per_mtu} "
                f"tuples of {tb} bytes fit a 1,500-byte packet"
            )
        if self.options.tuples_per_packet > room:
            raise UsageError(
                f"--tuples-per-packet {self.options.tuples_per_packet}: the board's buffer "
                f"holds {room} tuples of {tb} bytes"
            )
        return self.options.tuples_per_packet

    def run(
        self, nfa: Nfa, tuples: Tuples, params: EngineParams, values: ParamValues | None = None
    ) -> UdpSimResult:
        """Send ``tuples`` to the simulated board and decode what it sends back. Raises
        :class:`~nfacep.sim.build.SimulatorMissing`, :class:`SimulationError` when the
        simulation fails (no answer, a stuck board) and :class:`ContractError` when the board's
        frames or records are malformed; a board that did not keep up with the line
        (``engine_full``) or records that differ from the reference (``check``) set the
        result's ``failure``."""
        if nfa.program.parameters and not values:
            values = ParamValues.parse(nfa.program.parameters, [])  # (says what is missing)
        if params.engine == "programmable":
            _loads(nfa, params, values)  # (a file that does not fit: refused before any build)
        tb = wire.tuple_bytes(nfa.program.schema)
        per_packet = self.packet_size(tb)
        cache = build.ready(self.options.simulator, self.options.build_dir)
        cache.mkdir(parents=True, exist_ok=True)
        run_dir = Path(tempfile.mkdtemp(prefix="udp-", dir=cache))
        keep = True
        try:
            top_v, top = _emit(nfa, params, values, run_dir, self.options.engine_mhz)
            plan = _write_frames(nfa, tuples, values, top, per_packet, run_dir)
            with build.environment(self.options.simulator, cache):
                model = build.build_model(
                    self.options.simulator, top_v, TOP, cache, bool(self.options.waves)
                )
                run_testbench(
                    self.options.simulator,
                    model,
                    run_dir,
                    TOP,
                    TESTBENCH,
                    run_dir / "config.json",
                    waves=bool(self.options.waves),
                    seed=self.options.seed,
                )
            result = self._result(nfa, tuples, params, values, run_dir, plan)
            result.line["engine_mhz"] = round(top.engine_mhz, 3)
            keep = self.options.keep_run or result.failure is not None
            return result
        finally:
            if not keep:
                shutil.rmtree(run_dir, ignore_errors=True)

    def _result(
        self,
        nfa: Nfa,
        tuples: Tuples,
        params: EngineParams,
        values: ParamValues | None,
        run_dir: Path,
        plan: dict,
    ) -> UdpSimResult:
        from nfacep.links.host import board_result, check_values, record_format

        from .launch import _read_failure

        log = run_dir / "sim.log"
        failure = _read_failure(run_dir / "failure.json")
        results_path = run_dir / "udp_results.json"
        if failure is not None or not results_path.is_file():
            reason = failure["message"] if failure else "it ran no test"
            raise SimulationError(
                f"the {self.options.simulator} simulation of the UDP board failed: "
                f"{reason}\n(log: {log}; its end:\n{build.tail(log)})"
            )
        got = json.loads(results_path.read_text(encoding="utf-8"))
        if self.options.pcap is not None:
            _write_pcap(self.options.pcap, got, run_dir)
        n = tuples.n
        final = got["final"]
        rb = final["record_bytes"]
        packets = _board_packets(got["received"], final, run_dir)
        bodies = [(t, body) for t, kind, body in packets if kind == "records"]
        records = [body[at : at + rb] for _, body in bodies for at in range(0, len(body), rb)]
        line = _line(got["sent"], plan, n, final)
        latency = _latency(bodies, got["sent"], plan, record_format(nfa, params))
        try:
            result = board_result(
                UdpSimResult,
                nfa,
                n,
                records,
                final,
                params,
                port="udp",
                simulator=self.options.simulator,
                line=line,
                latency=latency,
                stats={"tuples_per_packet": plan["per"]},
            )
        except Exception as err:  # a LinkError: the board's records are not this engine's
            raise ContractError(str(err)) from None
        if params.engine == "programmable":  # (the values are constants in the image)
            values = None
        result.values = values or None
        check_values(values, final, n, error=ContractError)
        problems = [f"{final[c]} {c}" for c in ("engine_full", "lost", "late") if final[c]]
        if final["tuples"] != n % 2**32:
            problems.append(f"the engine took {final['tuples']} of {n} tuples")
        chip = check_errors(got.get("sdram", {}))  # (--store sdram: the chip's model)
        if chip:
            result.failure = SimulationError(f"{chip} (run folder: {run_dir})")
        elif problems:
            result.failure = SimulationError(
                f"the board did not take every packet sent at line rate ({', '.join(problems)}):"
                f" its records are incomplete (run folder: {run_dir})"
            )
        elif self.options.check:
            from nfacep.reference import matcher as reference

            model = reference.run(nfa, tuples, params, values=result.values)
            if model.matches != result.matches or model.drop_seqs != result.drop_seqs:
                result.failure = SimulationError(
                    f"the board's records differ from the reference matcher's (run folder: "
                    f"{run_dir})"
                )
        if self.options.waves:
            result.waves = deliver_waves(self.options.waves, run_dir, self.options.simulator)
        return result


def _emit(
    nfa: Nfa,
    params: EngineParams,
    values: ParamValues | None,
    run_dir: Path,
    engine_mhz: float | None = None,
) -> tuple[Path, object]:
    """The UDP board top's Verilog (the bitstream's addresses and settings, the engine in its
    own clock domain) in ``run_dir``; the top, its ``engine_mhz`` set: the board's PLL's
    frequency for ``engine_mhz`` (:func:`nfacep.links.udp.top.engine_clock`; default the
    build's choice)."""
    from nfacep.hdl.emit import verilog
    from nfacep.hdl.eth.top import UdpTop
    from nfacep.links.udp.protocol import DEFAULT_ENDPOINT

    board = DEFAULT_ENDPOINT
    from nfacep.links.udp.top import clock_engine

    engine = board_engine(nfa, params, values)
    try:
        clock = clock_engine(engine, engine_mhz)
    except UsageError:
        engine._MustUse__silence = True  # (never elaborated: the error says why)
        raise
    top = UdpTop(engine, mac=board.mac, ip=board.ip, port=board.port, engine_clock=True)
    top.engine_mhz = clock.mhz  # (the board's PLL gives it)
    path = run_dir / "udp_top.v"
    if "sdram" in top.signature.members:  # the board's pads and the chip's model beside it
        from .sdram import board_with_chip

        text = board_with_chip(top, TOP, run_dir.parent / "sdram")
    else:
        text = verilog(top, TOP)
    path.write_text(text, encoding="utf-8")
    return path, top


def board_engine(nfa: Nfa, params: EngineParams, values: ParamValues | None):
    """The engine of a UDP board top for ``nfa``: the fixed engine of its queries, or the
    programmable engine of ``params``' capacities for its stream declaration and key, booting
    with no image (its hosts load one over the link); with ``--store sdram`` either for the
    SDRAM chip of the board the top is built for (HardwareLimitError when it cannot hold the
    table)."""
    from nfacep.boards.registry import get_board
    from nfacep.hdl.engine import Engine
    from nfacep.links.udp.top import BOARD

    chip = get_board(BOARD).sdram
    if params.engine == "programmable":
        from nfacep.hdl.programmable import ProgrammableEngine

        return ProgrammableEngine(_shape(nfa, params), params, sdram=chip)
    return Engine(nfa, params, values=values, sdram=chip)


def _shape(nfa: Nfa, params: EngineParams):
    """The programmable engine's shape for ``nfa``'s stream declaration and key."""
    from nfacep.image import Capacity, EngineShape

    program = nfa.program
    return EngineShape(program.schema, program.partition_fields, Capacity.of(params))


def _loads(nfa: Nfa, params: EngineParams, values: ParamValues | None) -> list[bytes]:
    """The LOAD bodies of ``nfa``'s image, in force from tuple 0 (none for a fixed engine);
    :class:`~nfacep.image.ImageError` when it does not fit."""
    if params.engine != "programmable":
        return []
    from nfacep.image import image, load
    from nfacep.links.udp.protocol import load_chunks

    return load_chunks(load(image(nfa, _shape(nfa, params), values), 0))


def _write_frames(
    nfa: Nfa, tuples: Tuples, values: ParamValues | None, top, per_packet: int, run_dir: Path
) -> dict:
    """The frames to send (``frames.bin``) and the testbench's ``config.json``, in the order
    and form the host sends them (:func:`~nfacep.links.host.frame_order`); the plan: each
    frame's first tuple and tuple count, for the line and latency figures."""
    from nfacep.links.host import frame_order, switch_plan
    from nfacep.links.protocol import switch_body
    from nfacep.links.udp import protocol as udp

    board = udp.DEFAULT_ENDPOINT
    host = udp.Endpoint.parse(*HOST)
    schema = nfa.program.schema
    tb = wire.tuple_bytes(schema)
    raw = wire.pack_bytes(schema, tuples)
    engine = top._engine
    loads = _loads(nfa, engine.params, values)
    if loads:  # (the image holds the values)
        values = None
    built = values.packed(values.initial) if values else 0
    plan = switch_plan(values, built, tuples.n)
    switches = dict(plan)
    frames, waits = frame_order(tuples.n, per_packet, plan)
    engine_id = top.engine_id
    index, firsts, counts, lengths = [], [], [], []
    offset = 0
    with open(run_dir / "frames.bin", "wb") as f:
        for body in loads:  # the image first, in force from tuple 0
            data = udp.packet(udp.PacketType.LOAD, body, engine_id=engine_id, session=LOADER)
            frame = udp.udp_frame(host, board, data, udp_checksum=True)
            f.write(frame)
            index.append([offset, len(frame), None])
            firsts.append(0)
            counts.append(0)
            lengths.append(len(frame) + 4)
            offset += len(frame)
        for seq, (first, end) in enumerate(frames):
            if end is None:
                body = switch_body(first, switches[first], values.width())
                data = udp.packet(
                    udp.PacketType.PARAMS, body, seq=seq, engine_id=engine_id, session=SESSION
                )
            else:
                data = udp.packet(
                    udp.PacketType.TUPLES,
                    raw[first * tb : end * tb],
                    seq=seq,
                    engine_id=engine_id,
                    session=SESSION,
                )
            frame = udp.udp_frame(host, board, data, udp_checksum=True)  # (as an OS sends)
            f.write(frame)
            index.append([offset, len(frame), waits.get(seq)])
            firsts.append(first)
            counts.append(0 if end is None else end - first)
            lengths.append(len(frame) + 4)
            offset += len(frame)
    config = {
        "frames": "frames.bin",
        "index": index,
        "n": tuples.n,
        "flush": 1024,
        # (the engine's quiet cycles, in the link's: the STATUS wait's spacing)
        "quiet": 2 * (engine.params.partitions + 32) * max(1, round(125 / top.engine_mhz)),
        "engine_ps": round(1e6 / top.engine_mhz),
        "settle_ns": _settle_ns(top),
        "requests": {
            str(t): udp.udp_frame(
                host, board, udp.packet(t, session=SESSION), udp_checksum=True
            ).hex()
            for t in (udp.PacketType.RESET, udp.PacketType.STATUS_REQ)
        },
        "results": "udp_results.json",
        "failure": "failure.json",
    }
    (run_dir / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return {"per": per_packet, "firsts": firsts, "counts": counts, "lengths": lengths, "tb": tb}


def _settle_ns(top) -> float:
    """How long the engine takes after a RESET before it takes a tuple, waited before the
    first TUPLES packet as the host waits through its credit: the SDRAM chip's power-up and
    the store's clearing of its words (a word a clock or so: two allowed), or the table's
    clearing sweep (a row a clock, as the sidecar tells the batch harness); else nothing."""
    from nfacep.hdl.engine_shared import table_sidecar

    store = top._engine.store
    if store is not None and "sdram" in top.signature.members:
        return (store.cycles.power_up + 2 * store.clearing_words + 64) * 1e3 / top.engine_mhz
    table = table_sidecar(store)
    return 0.0 if table is None else (table["rows"] + 64) * 1e3 / top.engine_mhz


def _write_pcap(path: str, got: dict, run_dir: Path) -> None:
    """Every frame of the run, both ways, in the order they started on the wire, to the pcap
    file ``path`` (the simulated time from its start; no FCS)."""
    from nfacep.links.udp.pcap import PcapWriter

    frames = (run_dir / "frames.bin").read_bytes()
    index = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))["index"]
    seen = []
    for sent in got["sent"]:
        tag, start = sent[0], sent[1]
        if tag >= 0:
            offset, length = index[tag][:2]
            seen.append((start, frames[offset : offset + length]))
        else:
            seen.append((start, bytes.fromhex(sent[3])))
    seen += [(start, bytes.fromhex(hexed)[:-4]) for start, hexed, _ in got["received"]]
    seen.sort(key=lambda item: item[0])
    with PcapWriter(path) as capture:
        for start, frame in seen:
            capture.write(frame, round(start))


def _board_packets(received: list, final: dict, run_dir: Path) -> list[tuple[float, str, bytes]]:
    """The board's UDP packets since RESET as (time the frame started in ns, kind, body),
    checked: a good FCS, no transmit error, well-formed headers, ``seq`` without a gap."""
    from nfacep.links.udp import protocol as udp

    out, seqs = [], []
    for start, hexed, error in received:
        data = bytes.fromhex(hexed)
        frame, fcs = data[:-4], data[-4:]
        if error or fcs != udp.ethernet_fcs(frame):
            what = "a transmit error" if error else "a bad FCS"
            raise ContractError(
                f"the board sent a frame with {what} at {start} ns (run folder: {run_dir})"
            )
        try:
            parsed = udp.parse_frame(frame)
        except ValueError as err:
            raise ContractError(f"the board sent a malformed frame at {start} ns: {err}") from None
        if parsed["kind"] != "udp":
            continue
        head = udp.decode_header(parsed["payload"])
        if head["session"] == LOADER:  # (a LOAD's answer: no number of the session's)
            continue
        seqs.append(head["seq"])
        kind = {udp.PacketType.RECORDS: "records", udp.PacketType.STATUS: "status"}.get(
            head["type"]
        )
        if kind is None:
            raise ContractError(f"the board sent a packet of type {head['type']:#x}")
        out.append((start, kind, parsed["payload"][udp.HEADER_BYTES :]))
    # RESET restarts the board's numbering: its STATUS is 0, the rest follow without a gap
    since = seqs.index(0) if 0 in seqs else 0
    if seqs[since:] != list(range(len(seqs) - since)):
        raise ContractError(f"the board's packets are numbered {seqs[since:][:20]}: a gap")
    if final["packets"] != sum(kind == "records" for _, kind, _ in out[since:]):
        raise ContractError(
            f"STATUS counts {final['packets']} RECORDS packets, "
            f"{sum(kind == 'records' for _, kind, _ in out)} came"
        )
    return out[since:]


def _line(sent: list, plan: dict, n: int, final: dict) -> dict:
    """The run's figures on the line: the tuples the engine took and the frames the board
    accepted per second, from the first data frame's first byte to the last one's end, against
    the wire's limit for those frames (``limit_*``: every frame taken)."""
    data = [s for s in sent if s[0] >= 0]
    frames = len(data)
    if not frames:
        return {
            "frames": 0,
            "tuples_per_s": 0.0,
            "frames_per_s": 0.0,
            "of_line": 0.0,
            "tuples_per_packet": plan["per"],
            "limit_frames_per_s": 0.0,
            "limit_tuples_per_s": 0.0,
            "seconds": 0.0,
        }
    # from the first frame's first byte to the last one's gap after it: each frame's share of
    # the wire is its bytes and the 20 of the preamble and the minimum gap
    span_ns = data[-1][2] - data[0][1] + (1 + 12) * BYTE_NS
    wire_ns = sum(1e9 / line_limit(length) for length in plan["lengths"])
    seconds = span_ns * 1e-9
    refused = sum(final[c] for c in FRAME_CLASSES if c != "accepted")
    return {
        "frames": frames,
        "tuples_per_packet": plan["per"],
        "seconds": seconds,
        "tuples_per_s": final["tuples"] / seconds,
        "frames_per_s": (frames - refused) / seconds,
        "limit_tuples_per_s": n / (wire_ns * 1e-9),
        "limit_frames_per_s": frames / (wire_ns * 1e-9),
        "of_line": wire_ns / span_ns,
    }


#: Bytes from a frame's first preamble byte to its payload's body (tuples or records).
BODY_AT = 8 + 14 + 20 + 8 + HEADER_BYTES


def _latency(bodies: list, sent: list, plan: dict, fmt: wire.RecordFormat) -> dict:
    """Cycles (8 ns) from the end of each tuple's last byte on the receive pins to the start
    of its record's first byte on the transmit pins (only tuples with a record: a match or a
    drop): min, median, 99th percentile and max."""
    starts = {s[0]: s[1] for s in sent if s[0] >= 0}  # frame index -> start ns
    firsts = plan["firsts"]
    tuple_frames = [i for i, c in enumerate(plan["counts"]) if c]
    first_of = [firsts[i] for i in tuple_frames]
    tb, rb = plan["tb"], fmt.nbytes
    cycles = []
    for start, body in bodies:
        for k, at in enumerate(range(0, len(body), rb)):
            seq = fmt.decode_bytes(body[at : at + rb]).seq
            frame = tuple_frames[bisect.bisect_right(first_of, seq) - 1]
            last_byte_end = starts[frame] + (BODY_AT + (seq - firsts[frame] + 1) * tb) * BYTE_NS
            first_out = start + (BODY_AT + k * rb) * BYTE_NS
            cycles.append(round((first_out - last_byte_end) / CLOCK_NS))
    if not cycles:
        return {}
    cycles.sort()
    return {
        "records": len(cycles),
        "min": cycles[0],
        "median": int(statistics.median(cycles)),
        "p99": cycles[min(len(cycles) - 1, int(0.99 * len(cycles)))],
        "max": cycles[-1],
    }
