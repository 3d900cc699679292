"""``--store sdram`` on the UDP board top: the engine's SDRAM controller on the Colorlight
5A-75B's SDRAM pins through the I/O cells (``nfacep.boards.sdram``), its clock the engine's,
chosen for the line; ``check --board`` and ``build`` take it; ``sim --link udp --store sdram``
simulates the board top with the pads' registers and the chip's model and equals ``match``.
The fixed and the programmable engines alike."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from nfacep.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[3]
MARATHON = ROOT / "queries" / "marathon.sql"
BRUTEFORCE = ROOT / "queries" / "bruteforce.sql"
BOARD = ("--board", "colorlight-5a75b", "--link", "udp", "--store", "sdram")


@pytest.mark.slow
def test_the_board_top_drives_the_sdram_pins():
    """Every SDRAM pin of the 5A-75B is driven from an I/O cell's register in the engine's
    clock (OFS1P3DX out, IFS1P3DX in, the output enables registered), the SDRAM's clock by
    an ODDRX1F; the controller is built for the engine's clock with the pads' read delay."""
    from nfacep import compile_file
    from nfacep.boards import get_board
    from nfacep.boards.sdram import READ_DELAY
    from nfacep.hdl.engine import Engine
    from nfacep.links.udp.protocol import DEFAULT_ENDPOINT as ep
    from nfacep.links.udp.top import UdpBoardTop
    from nfacep.params import EngineParams

    platform = get_board("colorlight-5a75b").platform_class()()
    engine = Engine(compile_file(MARATHON), EngineParams(store="sdram", partitions=256))
    top = UdpBoardTop(engine, mac=ep.mac, ip=ep.ip, port=ep.port)
    setup, read_delay = engine.sdram_setup
    assert setup.clk_freq == pytest.approx(625e6 / 8) == pytest.approx(top.clock.mhz * 1e6)
    assert read_delay == READ_DELAY == 2
    plan = platform.build(top, name="t", do_build=False)
    rtlil, lpf = plan.files["t.il"], plan.files["t.lpf"]
    # ras, cas, we, ba, 11 address pins and 32 DQ, each with its output enable's (constant
    # but for DQ), the SDRAM clock's enable, and the 6 enables of RGMII's DDR outputs
    assert rtlil.count("cell \\OFS1P3DX") == 2 * (3 + 1 + 11 + 32) + 1 + 6
    assert rtlil.count("cell \\IFS1P3DX") == 32
    assert rtlil.count("cell \\ODDRX1F") == 6 + 1  # RGMII's and the SDRAM's clock
    for pin in ("C6", "C7", "E7", "D7", "A7", "A9", "C8", "B13", "E11"):  # clk ... dq31
        assert f'SITE "{pin}"' in lpf
    assert re.search(r'FREQUENCY NET "engine_clk[^"]*" 78125000\.', lpf)


FLOWS = """CREATE STREAM flows (src UINT(20), v UINT(8));
QUERY ab FROM flows PARTITION src PATTERN ( A B ) DEFINE A AS (v = 1) B AS (v = 2);
"""


@pytest.mark.slow
def test_check_says_what_fits_and_refuses_a_clock_the_pads_cannot_read_at(tmp_path, capsys):
    """``check --board``: 2^20 entries of a 20-bit key fill the Colorlight's SDRAM; marathon's
    engine clock is chosen for the line (78.125 MHz: the store's measured worst case, 0.230
    tuples a clock, needs 46.8, and the pads capture the read data from 71.4 up); at 62.5
    MHz the read capture falls outside the data's window (exit 2); a board top other than
    UDP's does not drive the chip (exit 2)."""
    flows = tmp_path / "flows.sql"
    flows.write_text(FLOWS)
    assert main(["check", str(flows), *BOARD, "--partitions", str(1 << 20)]) == 0
    out = capsys.readouterr().out
    assert "SDRAM words  1,048,576 1,048,576  100.0%  1,048,576 entries of 1 word" in out
    args = ["check", str(MARATHON), *BOARD]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "engine at 78.12 MHz (chosen by the build): 17.97M tuples/s" in out
    assert "keeps up" in out and "partitions in the board's SDRAM" in out
    assert "SDRAM words     65,536 1,048,576    6.2%" in out
    assert main([*args, "--engine-mhz", "62.5"]) == 2
    assert "captured outside its valid window" in capsys.readouterr().err
    assert main(["check", str(MARATHON), "--board", "colorlight-5a75b", "--store", "sdram"]) == 2
    err = capsys.readouterr().err
    assert "the harness board top does not drive the SDRAM chip; the uart and udp" in err


PROGRAMMABLE = ("--engine", "programmable")


@pytest.mark.slow
def test_check_puts_the_programmable_engines_partitions_in_the_sdram(tmp_path, capsys):
    """``check --engine programmable --store sdram`` on the Colorlight's UDP top: 65,536
    partitions of marathon's stream (the issue's; 4,096 in its block RAM) take half the chip,
    an entry (the states, the epoch, the timed slots) 6 words; 2^17 of a 20-bit key fill it
    and 2^18 are refused before anything is built (exit 2), as the board top of a harness."""
    args = ["check", str(MARATHON), *BOARD, *PROGRAMMABLE, "--partitions", "65536"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "SDRAM words    524,288 1,048,576   50.0%  65,536 entries of 6 words of 32 bits" in out
    assert "programmable engine (24 states, 16 atoms, 4 queries): fits" in out
    assert "partitions in the board's SDRAM (M12L16161A)" in out
    # the clock the build chooses: the programmable engine's (25 MHz), not the one the line
    # would need at its measured rate in the chip (0.060 tuples a clock), which it cannot reach
    assert "engine at 25.00 MHz (chosen by the build): 1.50M tuples/s" in out
    assert "SLOWER THAN THE LINE" in out
    flows = tmp_path / "flows.sql"
    flows.write_text(FLOWS)
    assert main(["check", str(flows), *BOARD, *PROGRAMMABLE, "--partitions", str(1 << 17)]) == 0
    assert "SDRAM words  1,048,576 1,048,576  100.0%" in capsys.readouterr().out
    assert main(["check", str(flows), *BOARD, *PROGRAMMABLE, "--partitions", str(1 << 18)]) == 2
    err = capsys.readouterr().err
    assert "need 2097152 words of SDRAM, more than its 1048576" in err and "Traceback" not in err
    harness = ["check", str(MARATHON), "--board", "colorlight-5a75b", "--store", "sdram"]
    assert main([*harness, *PROGRAMMABLE]) == 2
    assert "the harness board top does not drive the SDRAM chip" in capsys.readouterr().err


def evicting_tuples() -> str:
    """Marathon tuples of 192 runners in three rounds (Staten Island; Brooklyn for every third,
    else Manhattan; Queens): 256 ``cheat`` matches (two for each runner not in Brooklyn, at
    Manhattan and at Queens), each needing its runner's state written back to the SDRAM and
    read again (192 keys over 256 buckets, more than the cache's 64 lines)."""
    rows = ["time,checkpoint,runner,speed"]
    second = ["Brooklyn", "Manhattan", "Manhattan"]
    for k, place in enumerate(["Staten Island", None, "Queens"]):
        for i in range(192):
            where = place or second[i % 3]
            rows.append(f"{k * 1000 + i},{where},{1000 + 7 * i},5.00")
    return "\n".join(rows) + "\n"


@pytest.mark.slow
def test_sim_over_udp_with_the_sdram_equals_match(tmp_path, sim_cache):
    """The board top with the pads' registers and the chip's model (its timing rules at the
    engine's clock, checked): the records that come back over UDP are ``match``'s, with every
    partition's state read back from the chip (a wrong read delay in the controller fails)."""
    from nfacep.sim import build

    missing = build.simulator_available("icarus")
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    data = tmp_path / "in.csv"
    data.write_text(evicting_tuples())
    store = ["--store", "sdram", "--partitions", "1024"]
    ref, got = tmp_path / "match.csv", tmp_path / "udp.csv"
    assert main(["match", str(MARATHON), "--input", str(data), "--output", str(ref), *store]) == 0
    sim = ["sim", str(MARATHON), "--input", str(data), "--output", str(got), "--link", "udp"]
    assert main([*sim, *store, "--check", "--build-dir", str(sim_cache)]) == 0
    assert got.read_text() == ref.read_text()
    assert ref.read_text().count("\n") == 1 + 256


def test_sim_over_udp_takes_the_colorlights_chip(tmp_path, capsys):
    """The UDP top is the Colorlight's: ``sim --link udp`` builds its engine for that board's
    chip, so a table only the ULX3S's holds (2^22 entries of a 22-bit key) is refused naming
    the Colorlight's words (exit 2), where ``sim`` of the engine alone takes the ULX3S's."""
    query = tmp_path / "wide.sql"
    query.write_text(FLOWS.replace("UINT(20)", "UINT(22)"))
    data = tmp_path / "in.csv"
    data.write_text("src,v\n1,1\n1,2\n")
    argv = ["sim", str(query), "--input", str(data), "--output", str(tmp_path / "o.csv")]
    argv += ["--link", "udp", "--store", "sdram", "--partitions", str(1 << 22)]
    assert main(argv) == 2
    assert "need 4194304 words of SDRAM, more than its 1048576" in capsys.readouterr().err


@pytest.mark.slow
def test_programmable_sim_over_udp_with_the_sdram_equals_match(tmp_path, sim_cache):
    """The programmable engine on the SDRAM store behind the UDP link, its image loaded over
    it, at 25 MHz (the PLL's nearest to its Fmax on the board; the pads capture the chip's
    read data at the first edge after the CAS latency there, the chip's model clocked
    inverted): the records are ``match``'s, drops included (128 partitions for marathon's 61
    runners: four tuples find their bucket full), the chip's rules unbroken. (Most of the
    simulation is the chip's power-up wait and the store's clearing, a word a clock, before
    the host sends: 128 partitions take a quarter of 1,024's.)"""
    from nfacep.sim import build

    missing = build.simulator_available("icarus")
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    data = ROOT / "queries" / "marathon.csv"
    store = ["--store", "sdram", "--partitions", "128"]
    ref, got = tmp_path / "match.csv", tmp_path / "udp.csv"
    assert main(["match", str(MARATHON), "--input", str(data), "--output", str(ref), *store]) == 0
    sim = ["sim", str(MARATHON), "--input", str(data), "--output", str(got), "--link", "udp"]
    capacity = [*PROGRAMMABLE, "--states", "9", "--atoms", "7", "--queries", "1"]
    argv = [*sim, *store, *capacity, "--engine-mhz", "25", "--check"]
    assert main([*argv, "--build-dir", str(sim_cache)]) == 0
    assert got.read_text() == ref.read_text()
    assert ref.read_text().count("\n") == 1 + 7
    summary = json.loads(got.with_suffix(".summary.json").read_text())
    assert summary["line"]["engine_mhz"] == 25.0 and summary["board"]["engine_full"] == 0
    assert summary["board"]["engine"] == 1 and summary["board"]["refused"] == 0
    assert summary["board"]["drops"] == 4 and summary["board"]["partitions"] == 128
