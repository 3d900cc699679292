"""The engine's parameters: one value, its limits, its options, and how files record it."""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

import nfacep
from nfacep import params
from nfacep.errors import HardwareLimitError, UsageError
from nfacep.params import EngineParams


def parse(*argv: str, defaults: str | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    params.add_arguments(parser, defaults=defaults)
    return parser.parse_args(argv)


def test_defaults_and_one_value_everywhere():
    p = EngineParams()
    assert p.as_dict() == {
        "partitions": 256,
        "tick_tuples": 0,
        "timer_bits": 4,
        "store": "pipeline",
        "ways": 4,
    }
    assert p.options() == (
        "--partitions 256 --tick-tuples 0 --timer-bits 4 --store pipeline --ways 4"
    )
    programmable = EngineParams(engine="programmable", states=8)
    assert programmable.options().endswith(
        "--engine programmable --states 8 --atoms 16 --queries 4"
    )
    assert EngineParams(partitions=16) == EngineParams(16, 0, 4, "pipeline", 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.partitions = 3  # type: ignore[misc]
    assert hash(p) == hash(EngineParams())  # usable as a key, in sets, in caches


@pytest.mark.parametrize(
    ("values", "error", "message"),
    [
        ({"partitions": 0}, UsageError, "--partitions must be at least 1"),
        ({"tick_tuples": -1}, UsageError, "--tick-tuples must be 0 (no ticks) or more"),
        ({"timer_bits": 0}, UsageError, "--timer-bits must be at least 1"),
        (
            {"partitions": 65537},
            HardwareLimitError,
            "--partitions is 65537, more than the engine's limit of 65536",
        ),
        ({"timer_bits": 33}, HardwareLimitError, "--timer-bits is 33, more than"),
        ({"tick_tuples": 1 << 32}, HardwareLimitError, "--tick-tuples is 4294967296, more than"),
        ({"partitions": True}, UsageError, "--partitions must be an integer"),
        ({"timer_bits": 2.5}, UsageError, "--timer-bits must be an integer"),
    ],
)
def test_out_of_range_values_are_refused_naming_the_option(values, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        EngineParams(**values)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"store": "bram"}, "--store must be one of pipeline, table, sdram, not 'bram'"),
        (
            {"store": "sdram", "partitions": 3000},
            "--partitions 3000: with --store sdram, the table's entries must be a power of two",
        ),
        ({"store": "sdram", "ways": 8, "partitions": 4}, "--ways 8 is more than --partitions 4"),
        (
            {"store": "table", "partitions": 1000},
            "--partitions 1000: with --store table, the table's entries must be a power of two "
            "(such as 512 or 1024)",
        ),
        ({"store": "table", "ways": 3}, "--ways 3: with --store table, the ways of a bucket must"),
        ({"store": "table", "partitions": 2, "ways": 4}, "--ways 4 is more than --partitions 2"),
        ({"ways": 0}, "--ways must be at least 1"),
    ],
)
def test_a_table_that_cannot_be_built_is_refused_naming_the_option(values, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        EngineParams(**values)


def test_table_store_options_and_index_bits():
    p = params.from_args(parse("--store", "table", "--partitions", "65536", "--ways", "4"))
    assert (p.store, p.partitions, p.ways) == ("table", 65536, 4)
    assert (p.index_bits, p.bucket_bits) == (16, 14)
    assert EngineParams(store="table", partitions=1, ways=1).index_bits == 0
    # the pipeline ignores --ways and takes any number of partitions
    assert EngineParams(partitions=1000, ways=16).store == "pipeline"
    with pytest.raises(SystemExit):
        parse("--store", "bram")


def test_sdram_store_takes_millions_of_partitions():
    """--store sdram keeps up to 2^25 entries (the ULX3S's 32M words; 2^20 on the 5A-75B,
    which the chip's fit decides); the stores on chip 65,536. Its semantics are the table's,
    so the reference models both alike (``tabled``)."""
    p = params.from_args(parse("--store", "sdram", "--partitions", str(1 << 20)))
    assert (p.store, p.partitions, p.index_bits, p.tabled) == ("sdram", 1 << 20, 20, True)
    p = params.from_args(parse("--store", "sdram", "--partitions", str(1 << 25)))
    assert (p.partitions, p.index_bits) == (1 << 25, 25)
    assert EngineParams(store="table").tabled and not EngineParams().tabled
    with pytest.raises(HardwareLimitError, match="more than the engine's limit of 33554432"):
        EngineParams(store="sdram", partitions=1 << 26)
    for store in ("pipeline", "table"):
        with pytest.raises(
            HardwareLimitError,
            match=f"65537, more than the engine's limit of 65536 with --store {store}: use "
            "fewer partitions, or --store sdram",
        ):
            EngineParams(store=store, partitions=65537)


def test_limits_are_inclusive():
    edge = EngineParams(partitions=65536, tick_tuples=(1 << 32) - 1, timer_bits=32)
    assert edge == EngineParams(**edge.as_dict())
    assert EngineParams(partitions=1, tick_tuples=0, timer_bits=1).partitions == 1


def test_options_are_derived_from_the_definitions():
    args = parse()
    assert params.given(args) == {}
    assert params.from_args(args) == EngineParams()
    args = parse("--partitions", "8", "--timer-bits", "2")
    assert params.given(args) == {"partitions": 8, "timer_bits": 2}
    assert params.from_args(args) == EngineParams(partitions=8, timer_bits=2)
    # values not given come from the defaults handed in, given ones win
    base = EngineParams(partitions=16, tick_tuples=5)
    assert params.from_args(args, base) == EngineParams(partitions=8, tick_tuples=5, timer_bits=2)
    with pytest.raises(UsageError, match="--partitions must be at least 1"):
        params.from_args(parse("--partitions", "0"))


def test_help_names_each_option_with_its_default():
    parser = argparse.ArgumentParser()
    params.add_arguments(parser)
    text = parser.format_help()
    for f in dataclasses.fields(EngineParams):
        assert params.option(f.name) in text
    assert "(default 4)" in text and "(default table)" in text
    assert "256 with --store pipeline" in " ".join(text.split())  # the commands' default
    parser = argparse.ArgumentParser()
    params.add_arguments(parser, defaults="the manifest's")
    assert "(default the manifest's)" in parser.format_help()


def test_recorded_parameters_round_trip_and_foreign_ones_are_refused():
    p = EngineParams(partitions=12, tick_tuples=3, timer_bits=2)
    assert EngineParams.from_dict(p.as_dict(), source="x.json") == p
    with pytest.raises(
        UsageError,
        match=r"x.json: engine parameters from another nfacep "
        r"version \(unknown color; missing store, "
        r"timer_bits, ways\)",
    ):
        EngineParams.from_dict({"partitions": 1, "tick_tuples": 0, "color": "red"}, source="x.json")
    assert "engine" not in p.as_dict()  # a fixed engine's record: as before --engine
    q = EngineParams(engine="programmable", states=5, atoms=6, queries=7)
    assert q.as_dict()["states"] == 5 and EngineParams.from_dict(q.as_dict(), source="x") == q
    with pytest.raises(UsageError, match=r"x\.json: --partitions must be at least 1"):
        EngineParams.from_dict({**p.as_dict(), "partitions": 0}, source="x.json")
    with pytest.raises(UsageError, match=r"x\.json: the engine parameters are not an object"):
        EngineParams.from_dict([1, 2, 3], source="x.json")  # type: ignore[arg-type]
    assert EngineParams(partitions=12).differences(p) == [
        "--tick-tuples 0 (given: 3)",
        "--timer-bits 4 (given: 2)",
    ]


def test_queries_that_do_not_fit_one_engine():
    stream = "CREATE STREAM s (k UINT(64), a UINT(8));\n"
    params.check_fits(
        nfacep.compile_text(
            stream + "QUERY q PARTITION k PATTERN (A{2000} B{2000}) DEFINE A AS a = 1 B AS a = 2"
        )
    )
    big = "".join(f"QUERY q{i} PATTERN (A{{2000}}) DEFINE A AS a = {i % 256};" for i in range(3))
    with pytest.raises(
        HardwareLimitError,
        match="the number of NFA states is 6000, more than the engine's limit of 4096",
    ):
        params.check_fits(nfacep.compile_text(stream + big))


def test_programmable_engine_options():
    """``--states``, ``--atoms``, ``--queries`` only with ``--engine programmable``, and that
    only where a command takes it."""
    args = parse("--engine", "programmable", "--states", "12", "--queries", "2")
    p = params.from_args(args, programmable=True)
    assert (p.engine, p.states, p.atoms, p.queries) == ("programmable", 12, 16, 2)
    with pytest.raises(UsageError, match="does not build or model the programmable engine"):
        params.from_args(args)
    with pytest.raises(UsageError, match="--states, --atoms: only with --engine programmable"):
        params.from_args(parse("--states", "3", "--atoms", "2"))
    with pytest.raises(HardwareLimitError, match="--atoms is 2000, more than the engine's limit"):
        params.from_args(parse("--engine", "programmable", "--atoms", "2000"), programmable=True)


def _query(key: str) -> str:
    partition = f" PARTITION {key}" if key else ""
    return (
        "CREATE STREAM s (ts UINT(32), k4 UINT(4), k16 UINT(16), k32 UINT(32), a UINT(4));\n"
        f"QUERY q{partition} ORDER BY ts PATTERN (A B) DEFINE A AS a = 1 B AS a = 2;\n"
    )


@pytest.mark.parametrize(
    ("key", "given", "want"),
    [
        # a key of up to 16 bits indexes the table directly (at least MIN_ENTRIES entries)
        ("k16", {}, ("table", 65536, 4, "direct")),
        ("k4", {}, ("table", params.MIN_ENTRIES, 4, "direct")),
        # a wider one is hashed into HASHED_ENTRIES entries of --ways buckets
        ("k32", {}, ("table", params.HASHED_ENTRIES, 4, "hashed")),
        ("k32", {"ways": 8}, ("table", params.HASHED_ENTRIES, 8, "hashed")),
        # without PARTITION: the smallest engine
        ("", {}, ("table", 1, 1, "none")),
        # given options win; the pipeline by name keeps its 256 elements
        ("k16", {"store": "pipeline"}, ("pipeline", 256, 4, "pipeline")),
        ("k16", {"partitions": 2}, ("table", 2, 2, "hashed")),
        ("k16", {"store": "table", "partitions": 1024}, ("table", 1024, 4, "hashed")),
        # the SDRAM alone: sized as the table, directly up to SDRAM_KEY_BITS
        ("k16", {"store": "sdram"}, ("sdram", 65536, 4, "direct")),
        # (a 32-bit tag makes an entry two words: half the entries fit the chip)
        ("k32", {"store": "sdram"}, ("sdram", params.SDRAM_ENTRIES // 2, 4, "hashed")),
    ],
)
def test_the_default_engine(key, given, want):
    nfa = nfacep.compile_text(_query(key))
    engine = params.default_engine(nfa, given)
    assert (engine.store, engine.partitions, engine.ways, engine.indexing(nfa)) == want
    assert engine.tick_tuples == 0 and engine.timer_bits == EngineParams.timer_bits
    # every command's from_args gives the same, and says how it keeps the partitions
    argv = [a for name, v in given.items() for a in (params.option(name), str(v))]
    assert params.from_args(parse(*argv), nfa=nfa) == engine


def test_sdram_tables_the_chip_cannot_hold_are_refused_before_anything_runs(tmp_path, capsys):
    """Whether a table fits the SDRAM depends on the query (an entry of k32's query is 1 + 32
    + 3 bits: two words of the 5A-75B's 32 bits, a bucket of 4 ways eight; three of the
    ULX3S's 16): the default engine takes the largest that fits the 5A-75B, a table given
    with --partitions may take the ULX3S's chip, and every command that takes the engine's
    options refuses one that fits neither with the engine's own message, before it reads or
    generates anything (`vectors` once accepted 2^20 entries that the simulation then
    refused)."""
    from nfacep.cli import main

    nfa = nfacep.compile_text(_query("k32"))
    # 2^20 entries: 2^21 words of the 5A-75B, 4 x 3 words (a line of 16) a bucket on the ULX3S
    assert params.default_engine(nfa, {"store": "sdram", "partitions": 1 << 20})
    message = (
        "--store sdram: 4194304 buckets of 16 words need 67108864 words of SDRAM, more than "
        "its 33554432: use fewer --partitions"
    )
    with pytest.raises(HardwareLimitError, match=re.escape(message)):
        params.default_engine(nfa, {"store": "sdram", "partitions": 1 << 24})
    q = tmp_path / "q.sql"
    q.write_text(_query("k32"), encoding="utf-8")
    too_big = ["--store", "sdram", "--partitions", str(1 << 24)]
    missing = str(tmp_path / "none.csv")
    for argv in (
        ["match", str(q), "--input", missing, "--output", str(tmp_path / "m.csv"), *too_big],
        ["vectors", str(q), "--tuples", "10", "--out", str(tmp_path / "v"), *too_big],
        ["verilog", str(q), "-o", str(tmp_path / "e.v"), *too_big],
    ):
        assert main(argv) == 2, argv[0]
        assert message in capsys.readouterr().err
    assert not (tmp_path / "v").exists()


def test_check_prints_the_engine_it_uses(tmp_path, capsys):
    import json

    from nfacep.cli import main

    q = tmp_path / "q.sql"
    q.write_text(_query("k32"), encoding="utf-8")
    assert main(["check", str(q)]) == 0
    out = capsys.readouterr().out
    assert (
        "engine (every command): the table store, 65,536 entries in 16,384 buckets of 4 ways, "
        "hashed from the 32-bit key (a new key whose bucket is full is dropped); no timers"
    ) in out
    assert "  as options: --partitions 65536 --tick-tuples 0 --timer-bits 4 --store table" in out
    assert main(["check", str(q), "--json", "--tick-tuples", "9", "--store", "pipeline"]) == 0
    doc = json.loads(capsys.readouterr().out)["engine"]
    assert doc["parameters"] == EngineParams(store="pipeline", tick_tuples=9).as_dict()
    assert doc["indexing"] == "pipeline"
    assert doc["text"].startswith("the swap pipeline, 256 partitions")
    assert "a timer tick every 9 tuples, 4-bit timers" in doc["text"]


def test_a_direct_table_larger_than_its_key_says_how_many_entries_the_key_addresses():
    """A table indexed directly by a 16-bit key uses 65,536 of the 262,144 entries asked
    for: ``check`` says so rather than promising entries no key reaches."""
    from pathlib import Path

    nfa = nfacep.compile_file(Path(__file__).parents[2] / "queries" / "marathon.sql")
    wide = EngineParams(store="sdram", partitions=1 << 18).describe(nfa)
    assert "262,144 entries, indexed directly by the 16-bit key" in wide
    assert "which addresses 65,536 of them" in wide
    exact = EngineParams(store="sdram", partitions=1 << 16).describe(nfa)
    assert "indexed directly by the 16-bit key" in exact and "addresses" not in exact
