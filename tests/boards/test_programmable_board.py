# amaranth: UnusedElaboratable=no
"""``nfacep build --engine programmable`` and ``nfacep check --board --engine programmable``:
the board's programmable engine boots with the file's image (against the reference, in
Amaranth's simulator), the fit and the resources before synthesis, the refusals, and one
build through synthesis (nextpnr faked: the report names the engine and its capacities)."""

import json
import os

import pytest
from bundled import QUERIES, param_args
from test_boards import fake_tool, no_toolchain  # noqa: F401 (a fixture, used by name)
from test_programmable import simulate

import nfacep
from nfacep.boards import get_board
from nfacep.boards.bitstream import synth_options
from nfacep.cli import main
from nfacep.hdl.boot import BootedEngine
from nfacep.hdl.programmable import config_layout
from nfacep.image import Capacity, EngineShape, image
from nfacep.io import reader
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference


@pytest.mark.slow
def test_the_booted_engine_matches_the_file_with_no_load_sent():
    """The board's engine puts the file's image in force by itself after the reset: with no
    byte written to any configuration port it gives the reference's matches, and names the
    image."""
    nfa = nfacep.compile_file(str(QUERIES / "vshape.sql"))
    data = reader.read(str(QUERIES / "vshape.csv"), nfa.program.schema)
    params = EngineParams(partitions=64, store="table", engine="programmable", states=8, atoms=8)
    shape = EngineShape(nfa.program.schema, nfa.program.partition_fields, Capacity.of(params))
    records, counters = simulate(
        shape, [], data, params, engine=lambda s, p: BootedEngine(s, p, nfa)
    )
    r = reference.run(nfa, data, params)
    assert r.seqs.size and [s for s, _, m, d in records if m and not d] == r.seqs.tolist()
    assert counters["refused"] == 0
    assert counters["image"] == image(nfa, shape).fingerprint


@pytest.mark.slow
# the most states, atoms and queries; the longest window and the most timed states
@pytest.mark.parametrize("name", ["supplychain", "bruteforce"])
@pytest.mark.usefixtures("no_toolchain")
def test_the_colorlight_default_holds_every_bundled_query_that_fits(name, capsys):
    """``check --board colorlight-5a75b --engine programmable``: the board's default capacity
    holds each bundled query (WITHIN ones too: bruteforce's), the fit and the
    resources as for the fixed engine, not refused before synthesis."""
    argv = ["check", str(QUERIES / f"{name}.sql"), "--board", "colorlight-5a75b"]
    argv += ["--engine", "programmable", "--json"]
    argv += param_args(name)
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    fit, board = doc["programmable"], doc["board"]
    assert fit["states"][1] == 24 and fit["atoms"][1] == 16 and fit["queries"][1] == 4
    assert all(used <= cap for used, cap in (fit["states"], fit["atoms"], fit["queries"]))
    assert fit["timed"] == [6 if name == "bruteforce" else 0, 6]  # bruteforce: 6 windowed states
    assert board["engine"]["kind"] == "programmable"
    assert board["engine"]["capacity"] == {"states": 24, "atoms": 16, "queries": 4}
    assert board["engine"]["boot_image"]["fingerprint"] == fit["fingerprint"]
    assert doc["engine"]["parameters"]["engine"] == "programmable"
    assert not board["refused"]
    ffs, brams = board["resources"]["ffs"], board["resources"]["brams"]
    assert 0 < ffs["estimate"] < ffs["total"] and 0 < brams["estimate"] <= brams["total"]


@pytest.mark.usefixtures("no_toolchain")
def test_check_board_names_every_capacity_exceeded(capsys):
    argv = ["check", str(QUERIES / "marathon.sql"), "--board", "ulx3s-85f"]
    assert main([*argv, "--engine", "programmable", "--states", "4", "--atoms", "2"]) == 2
    err = capsys.readouterr().err
    assert "states: the queries need 9, the engine has 4" in err
    assert "atoms: the conditions need 7, the engine has 2" in err


@pytest.mark.usefixtures("no_toolchain")
def test_a_link_that_switches_parameters_is_refused(capsys):
    argv = ["check", str(QUERIES / "supplychain.sql"), "--board", "ulx3s-85f"]
    argv += ["--engine", "programmable", "--link", "uart", "--param", "big=20000"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--engine programmable --link uart" in err and "--link harness or udp" in err


@pytest.mark.slow
@pytest.mark.usefixtures("no_toolchain")
def test_a_uart_board_boots_the_image_with_its_partitions_in_sdram(capsys):
    """``--store sdram`` on the ULX3S's UART top: the engine that boots with the file's image
    passes the programmable engine's SDRAM pins out to the board's chip (the link's note says
    so), its 65,536 entries of 11 of the chip's 16-bit words; the controller built for the
    board's 25 MHz."""
    argv = ["check", str(QUERIES / "marathon.sql"), "--board", "ulx3s-85f", "--link", "uart"]
    argv += ["--engine", "programmable", "--store", "sdram", "--partitions", "65536", "--json"]
    assert main(argv) == 0
    board = json.loads(capsys.readouterr().out)["board"]
    assert board["engine"]["boot_image"]["states"] == 9
    assert board["resources"]["sdram"]["from"].startswith("65,536 entries of 11 words of 16")
    assert "partitions in the board's SDRAM (AS4C32M16SB)" in board["link_note"]
    nfa = nfacep.compile_file(QUERIES / "marathon.sql")
    params = EngineParams(engine="programmable", store="sdram", partitions=1 << 16)
    shape = EngineShape(nfa.program.schema, ("runner",), Capacity.of(params))
    booted = BootedEngine(shape, params, nfa, sdram=get_board("ulx3s-85f").sdram)
    booted.engine._MustUse__silence = True  # (asked for its pins only, never elaborated)
    assert booted.signature.members["sdram"] == booted.engine.signature.members["sdram"]
    booted.use_sdram(booted.sdram_setup[0], 1)
    assert booted.engine.sdram_setup[1] == 1


@pytest.mark.usefixtures("no_toolchain")
def test_a_udp_board_boots_with_no_image_its_hosts_load_one(capsys):
    """Over UDP the programmable board takes its queries in LOAD packets (``run``, ``load``):
    it is built with no boot image, and a file with runtime parameters is not refused (their
    values are constants in the images its hosts send); a file that does not fit still is."""
    argv = ["check", str(QUERIES / "supplychain.sql"), "--board", "colorlight-5a75b", "--json"]
    argv += ["--engine", "programmable", "--link", "udp", "--param", "big=20000"]
    assert main(argv) == 0
    engine = json.loads(capsys.readouterr().out)["board"]["engine"]
    assert engine["kind"] == "programmable" and engine["boot_image"] is None
    assert main([*argv, "--states", "4"]) == 2
    assert "states" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize(
    "store", [(), ("--store", "sdram", "--partitions", "65536", "--engine-mhz", "25")]
)
def test_a_udp_build_reports_the_programmable_engine(tmp_path, monkeypatch, capsys, store):
    """``build --link udp --engine programmable`` writes report.json when place-and-route
    fails (Yosys and nextpnr faked): the engine, booting with no image, has no runtime
    parameters of its own; with ``--store sdram`` its partitions are in the board's chip,
    read at the edge the pads' window takes at the engine's clock."""
    monkeypatch.chdir(tmp_path)  # (the fake Yosys also runs when the tools are looked up)
    stat = '{"design": {"num_cells_by_type": {"LUT4": 1}}}'
    yosys = fake_tool(tmp_path, "yosys", f"echo '{stat}' > nfacep_top.stat.json\n")
    monkeypatch.setenv("YOSYS", yosys)
    monkeypatch.setenv("NEXTPNR_ECP5", fake_tool(tmp_path, "nextpnr", "exit 1\n"))
    out = tmp_path / "o"
    argv = ["build", str(QUERIES / "marathon.sql"), "--board", "colorlight-5a75b", "-o", str(out)]
    assert main([*argv, "--link", "udp", "--engine", "programmable", *store]) == 2
    assert "place-and-route (nextpnr) failed" in capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    assert report["engine"]["kind"] == "programmable" and report["runtime_parameters"] is None
    if store:
        assert report["parameters"]["store"] == "sdram"
        assert report["parameters"]["partitions"] == 65536
        sdram = report["link"]["sdram"]
        assert (sdram["chip"], sdram["mhz"], sdram["read_delay"]) == ("M12L16161A", 25.0, 1)
        assert report["link"]["engine_mhz"] == 25.0 and not report["link"]["keeps_up"]


def test_only_the_programmable_engine_on_the_ecp5_is_synthesised_without_wide_luts():
    programmable = EngineParams(engine="programmable", states=8, atoms=8, queries=1)
    assert synth_options(get_board("colorlight-5a75b"), programmable) == "-nowidelut"
    assert synth_options(get_board("ulx3s-85f"), EngineParams()) is None
    assert synth_options(get_board("icebreaker"), programmable) is None


@pytest.mark.slow
def test_build_synthesises_the_programmable_engine(tmp_path, monkeypatch, capsys):
    """``nfacep build --engine programmable`` through Yosys (nextpnr faked to fail, so no
    place-and-route runs): report.json names the engine's kind, capacities and boot image,
    and the configuration registers survive synthesis (they are loaded, not constants): two
    more atoms add two flip-flops per configuration bit they add, one for the configuration
    in force and one for the one being loaded. A small stream and engine (2 states, 2 and 4
    atoms): Yosys took 50.6 s for vshape's at 8 and 8 (38 s of it in ABC), 3.0 s for one of
    these."""
    monkeypatch.setenv("NEXTPNR_ECP5", fake_tool(tmp_path, "nextpnr", "exit 1\n"))
    query = tmp_path / "dip.sql"
    query.write_text(
        "CREATE STREAM s (k UINT(4), v UINT(8));\n"
        "QUERY dip PARTITION k PATTERN (HIGH LOW) DEFINE HIGH AS v > 3, LOW AS v < 2;\n"
    )
    nfa = nfacep.compile_file(str(query))
    assert len(nfa.states) == 2
    ffs, bits = {}, {}
    for atoms in (2, 4):
        out = tmp_path / f"o{atoms}"
        argv = ["build", str(query), "--board", "ulx3s-85f", "-o", str(out), "--engine"]
        argv += ["programmable", "--states", "2", "--atoms", str(atoms), "--queries", "1"]
        assert main([*argv, "--store", "pipeline", "--partitions", "4"]) == 2
        assert "place-and-route (nextpnr) failed" in capsys.readouterr().err
        report = json.loads((out / "report.json").read_text())
        assert report["parameters"]["engine"] == "programmable"
        engine = report["engine"]
        assert engine["kind"] == "programmable"
        assert engine["capacity"] == {"states": 2, "atoms": atoms, "queries": 1}
        shape = EngineShape(nfa.program.schema, nfa.program.partition_fields, Capacity(2, atoms, 1))
        assert engine["boot_image"] == {
            "fingerprint": image(nfa, shape).fingerprint,
            "states": len(nfa.states),
            "atoms": len(image(nfa, shape).atoms),
            "queries": 1,
        }
        assert report["resources_from"] == "yosys"
        # Yosys maps the programmable engine to LUT4s only (boards.bitstream.synth_options)
        assert "synth_ecp5 -nowidelut" in (out / "toolchain" / "nfacep_top.ys").read_text()
        assert report["resources"]["luts"]["used"] > 0
        assert os.path.exists(out / "dip.v")
        ffs[atoms], bits[atoms] = report["resources"]["ffs"]["used"], config_layout(shape).size
    # the configuration in force and the one being loaded: both kept (101 and 141 bits of
    # configuration here; 1,061 and 1,141 flip-flops)
    assert bits[4] > bits[2]
    assert ffs[4] - ffs[2] >= 2 * (bits[4] - bits[2])
