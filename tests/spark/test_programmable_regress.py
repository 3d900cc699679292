"""``nfacep regress --engine programmable``: the vectors' expected matches against the simulated
programmable engine configured with the query's image (Verilator's native model), and a
damaged image (activation bits cleared in the load every task takes) caught."""

from __future__ import annotations

import dataclasses

import pytest
from test_spark_regress import QUERIES, make, regress_cli, report_of

from nfacep import sim
from nfacep.image import Capacity, EngineShape, image, load, port_words
from nfacep.params import EngineParams
from nfacep.spark_testbench import regress_tasks

pytestmark = pytest.mark.xdist_group("spark_regress")

MARATHON = str(QUERIES / "marathon.sql")
ENGINE = ("--engine", "programmable", "--states", "16", "--atoms", "8", "--queries", "1")


def damaged(nfa, sidecar, values):
    """:func:`regress_tasks.configure` with the lowest activation bit of every accepting state
    cleared: the last step of each branch of the pattern loses one way in."""
    c = sidecar["capacity"]
    prog = nfa.program
    shape = EngineShape(
        prog.schema, prog.partition_fields, Capacity(c["states"], c["atoms"], c["queries"])
    )
    img = image(nfa, shape, values)
    states = tuple(
        dataclasses.replace(s, activation=s.activation & (s.activation - 1)) if s.accept else s
        for s in img.states
    )
    assert states != img.states
    return port_words(load(dataclasses.replace(img, states=states)))


@pytest.mark.slow
def test_the_programmable_engine_passes_marathon_and_a_damaged_image_is_caught(
    spark, tmp_path, monkeypatch, capsys
):
    if sim.simulator_available("verilator"):
        pytest.fail("the native mode needs Verilator (tools/install-simulators.sh)")
    out = tmp_path / "v"
    manifest = make(spark, out, MARATHON, EngineParams(partitions=16), keys=16, tuples=1000)
    assert manifest["counts"]["matches_total"] > 0
    # refused before any simulation: capacities alone, and a file that does not fit
    assert regress_cli(out, MARATHON, "--states", "16") == 2
    assert "--states: only with --engine programmable" in capsys.readouterr().err
    assert regress_cli(out, MARATHON, "--engine", "programmable", "--states", "4") == 2
    assert "states: the queries need 9, the engine has 4" in capsys.readouterr().err
    args = (*ENGINE, "--build-dir", str(tmp_path / "cache"), "--tasks", "2")
    args += ("--simulator", "verilator", "--mode", "native", "--quiet")
    assert regress_cli(out, MARATHON, *args) == 0
    report = report_of(out)
    assert report["equal"] and report["counts"]["differences"] == 0
    assert report["engine"]["engine"] == "programmable" and report["engine"]["states"] == 16
    assert report["counts"]["simulated"] == manifest["counts"]["matches_total"]
    capsys.readouterr()

    monkeypatch.setattr(regress_tasks, "configure", damaged)
    assert regress_cli(out, MARATHON, *args) == 1
    c = report_of(out)["counts"]
    assert c["differences"] == c["missing"] + c["extra"] > 0 and c["missing"] > 0
