"""Runtime parameters (issue 14): ``:name`` in DEFINE, typed by the field it is compared with;
``--param name=value[@seq]``. The language and its errors, the values and their errors, and
the reference matcher's paths against each other (what they match is judged against the oracle
in test_oracle_differential.py)."""

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nfacep
from nfacep.cli import main
from nfacep.errors import QueryError, UsageError
from nfacep.io.tuples import Tuples
from nfacep.lang.types import EnumType, Float32Type, IntType
from nfacep.reference import matcher as reference
from nfacep.settings import ParamValues

STREAM = (
    "CREATE STREAM s (k UINT(8), temp INT(16), z ENUM('a', 'b', 'c'), f FLOAT32, "
    "on BOOL, u UINT(4));\n"
)


def compile_(text):
    return nfacep.compile_text(STREAM + text, "q.sql")


def test_a_parameter_takes_its_fields_type_and_is_shared():
    nfa = compile_(
        "QUERY q PARTITION k PATTERN (H+ S) DEFINE H AS temp > :hot AND z = :zone, "
        "S AS f >= :lim OR on = :flag;\n"
        "QUERY r PARTITION k PATTERN (A) DEFINE A AS :hot <= temp AND u IN (1, :u)"
    )
    assert nfa.program.parameters == {
        "hot": IntType(16),
        "zone": EnumType(("a", "b", "c")),
        "lim": Float32Type(),
        "flag": nfa.program.parameters["flag"],
        "u": nfa.program.parameters["u"],
    }
    texts = [p.text for p in nfa.predicates]
    assert "(temp > :hot) AND (z = :zone)" in texts
    assert any("temp >= :hot" in t for t in texts)  # a lone parameter goes to the right


@pytest.mark.parametrize(
    ("define", "message"),
    [
        ("temp > :x + 1", "parameter :x must be compared directly with a field"),
        (":x > :y", "parameter :y must be compared directly with a field"),
        ("5 > :x", "parameter :x must be compared directly with a field"),
        ("-:x < temp", "parameter :x must be compared directly with a field"),
        (
            "temp > :x AND k = :x",
            "parameter :x is compared with UINT(8) field 'k' here, but with "
            "INT(16) field 'temp' before",
        ),
        ("z < :x", "can only be compared with = or <>"),
        ("on > :x", "can only be compared with = or <>"),
        (":x", "expected a condition"),
        ("temp > :", "a parameter is written ':name'"),
    ],
)
def test_parameter_errors(define, message):
    with pytest.raises(QueryError, match=re.escape(message)):
        compile_(f"QUERY q PARTITION k PATTERN (A) DEFINE A AS {define}")


TYPES = compile_(
    "QUERY q PATTERN (A) DEFINE A AS temp > :hot AND z = :zone AND f < :lim AND on = :flag"
).program.parameters


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        ([], "need values: --param hot=…, --param zone=…, --param lim=…, --param flag=…"),
        (["hot=1", "zone=a", "lim=2"], r"need values: --param flag=… \(:flag BOOL\)"),
        (["hot=40000"], r"40000 does not fit :hot's type INT\(16\) \(-32768..32767\)"),
        (["hott=1"], r"no parameter :hott \(did you mean :hot\?\)"),
        (["hot"], "write name=value or name=value@seq"),
        (["=1"], "write name=value"),
        (["zone=d"], "not a label of :zone's type"),
        (["zone=A"], r"did you mean 'a'\?"),
        (["hot=1.5"], r":hot is INT\(16\): give an integer"),
        (["lim=x"], ":lim is FLOAT32: give a decimal number"),
        (["lim=nan"], ":lim is FLOAT32: give a decimal number"),
        (["lim=1e39"], "beyond the range of FLOAT32"),
        (["flag=yes"], ":flag is BOOL: give true or false"),
        (["hot=1", "hot=2"], ":hot is given twice for tuple 0"),
        (["hot=1@5", "hot=2@5"], ":hot is given twice for tuple 5"),
        (["hot=1@x"], r":hot is INT\(16\): give an integer"),
    ],
)
def test_value_errors(texts, message):
    with pytest.raises(UsageError, match=message):
        ParamValues.parse(TYPES, texts)


def test_values_and_switches():
    v = ParamValues.parse(
        TYPES,
        [
            "hot=-3",
            ":zone=b",
            "lim=0.1",
            "flag=TRUE",
            "hot=7@4",
            "zone=c@4",
            "hot=9@2",
            "flag=false@9",
            "lim=-inf@9",
        ],
    )
    assert v.in_force(9)["lim"] == float("-inf")
    assert v.initial == {"hot": -3, "zone": 1, "lim": float(np.float32(0.1)), "flag": True}
    assert [s for s, _ in v.switches] == [2, 4, 9]
    assert v.in_force(3) == {"hot": 9, "zone": 1, "lim": v.initial["lim"], "flag": True}
    assert v.in_force(4)["hot"] == 7 and v.in_force(4)["zone"] == 2
    cols = v.columns(6)
    assert cols[":hot"].tolist() == [-3, -3, 9, 9, 7, 7]
    assert cols[":lim"].ndim == 0 and cols[":flag"].ndim == 0  # constant here: one value
    assert v.columns(3, first=3)[":hot"].tolist() == [9, 7, 7]
    assert v.as_dict()["switches"][1] == {"seq": 4, "values": {"hot": 7, "zone": "c"}}
    with pytest.raises(UsageError, match="not switches"):
        ParamValues.parse(TYPES, ["hot=1@3"], switches=False, command="nfacep verilog")


@pytest.mark.parametrize("narrow", [True, False])
def test_reference_paths_agree_with_switches(narrow):
    """The compiled stream-order loop and the array operations, the DFA and the NFA, and the
    narrow-field shortcut (predicates over one small field, evaluated per distinct value: only
    while no parameter changes) give equal results; a switch changes them."""
    rng = np.random.default_rng(3)
    n = 6000
    cols = {
        "k": rng.integers(0, 40, n).astype(np.uint8),
        "temp": rng.integers(-50, 50, n),
        "z": rng.integers(0, 3, n),
        "f": rng.random(n).astype(np.float32),
        "on": rng.random(n) < 0.5,
        "u": rng.integers(0, 16, n).astype(np.uint8),
    }
    define = (
        "A AS u > :lo, B AS u <= :hi"
        if narrow
        else "A AS temp > :lo2 AND z <> :zone, B AS f < :lim"
    )
    nfa = compile_(f"QUERY q PARTITION k PATTERN (A B+ A) DEFINE {define}")
    types = nfa.program.parameters
    fixed = ["lo=9", "hi=6"] if narrow else ["lo2=10", "zone=a", "lim=0.4"]
    switched = fixed + (
        ["lo=12@2000", "hi=3@2000", "lo=4@4500"]
        if narrow
        else ["lo2=-20@2000", "zone=c@3000", "lim=0.7@3000"]
    )
    data = Tuples(cols, n)
    got = {}
    for name, texts in (("fixed", fixed), ("switched", switched)):
        values = ParamValues.parse(types, texts)
        runs = [
            reference.run(nfa, data, values=values, compiled=c, engine=e)
            for c in (True, False)
            for e in ("dfa", "nfa")
        ]
        for r in runs[1:]:
            assert np.array_equal(r.seqs, runs[0].seqs)
        got[name] = runs[0].seqs
        assert len(got[name])
    assert not np.array_equal(got["fixed"], got["switched"])
    # before the first switch the two agree
    early = {name: seqs[seqs < 2000] for name, seqs in got.items()}
    assert np.array_equal(early["fixed"], early["switched"])


def test_match_command(tmp_path, capsys):
    (tmp_path / "q.sql").write_text(
        STREAM + "QUERY q PARTITION k PATTERN (H H) DEFINE H AS temp > :hot AND z = :zone"
    )
    rows = ["k,temp,z,f,on,u"] + [f"1,50,{z},0,false,0" for z in "aaabbba"]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    base = [
        "match",
        str(tmp_path / "q.sql"),
        "--input",
        str(tmp_path / "t.csv"),
        "--output",
        str(tmp_path / "m.csv"),
    ]
    assert main(base) == 2
    assert "need values: --param hot=…, --param zone=…" in capsys.readouterr().err
    assert not (tmp_path / "m.csv").exists()
    assert main([*base, "--param", "hot=45", "--param", "zone=a"]) == 0
    assert (tmp_path / "m.csv").read_text().splitlines()[1:] == ["1,q,1", "2,q,1"]
    # hot 50 from tuple 2 (50 > 50 fails), zone b from 3, hot 45 again from 4: tuples 4 and
    # 5 hold, a match at 5
    assert (
        main(
            [
                *base,
                "--param",
                "hot=45",
                "--param",
                "zone=a",
                "--param",
                "hot=50@2",
                "--param",
                "zone=b@3",
                "--param",
                "hot=45@4",
            ]
        )
        == 0
    )
    assert (tmp_path / "m.csv").read_text().splitlines()[1:] == ["1,q,1", "5,q,1"]
    summary = json.loads((tmp_path / "m.summary.json").read_text())
    assert summary["runtime_parameters"] == {
        "initial": {"hot": 45, "zone": "a"},
        "switches": [
            {"seq": 2, "values": {"hot": 50}},
            {"seq": 3, "values": {"zone": "b"}},
            {"seq": 4, "values": {"hot": 45}},
        ],
    }
    capsys.readouterr()
    assert main(["check", str(tmp_path / "q.sql")]) == 0
    assert ":hot INT(16), :zone ENUM('a', 'b', 'c')" in capsys.readouterr().out
    assert main(["check", "--json", str(tmp_path / "q.sql")]) == 0
    assert json.loads(capsys.readouterr().out)["parameters"][0] == {
        "name": "hot",
        "type": "INT(16)",
        "bits": 16,
    }


# --- the gateware, simulated -----------------------------------------------------------------

SIM_QUERY = STREAM + (
    "QUERY q PARTITION k PATTERN (H+ S) DEFINE H AS temp > :hot AND z = :zone, "
    "S AS f >= :lim OR on = :flag;\n"
    "QUERY r PARTITION k PATTERN (A A) DEFINE A AS temp <= :hot"
)
SIM_VALUES = [
    "--param",
    "hot=10",
    "--param",
    "zone=a",
    "--param",
    "lim=1.0",
    "--param",
    "flag=true",
    "--param",
    "hot=50@300",
    "--param",
    "zone=b@300",
    "--param",
    "lim=-2@301",
    "--param",
    "flag=false@700",
    "--param",
    "hot=-20@701",
]


def sim_files(tmp_path):
    rng = np.random.default_rng(1)
    rows = ["k,temp,z,f,on,u"]
    for _ in range(900):
        rows.append(
            f"{rng.integers(0, 20)},{rng.integers(-100, 100)},"
            f"{'abc'[rng.integers(0, 3)]},{rng.choice([-1.5, 0.25, 2.0, 7.5])},"
            f"{'true' if rng.random() < 0.2 else 'false'},0"
        )
    (tmp_path / "q.sql").write_text(SIM_QUERY)
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    return str(tmp_path / "q.sql"), str(tmp_path / "t.csv")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "simulator"), [("batch", "icarus"), ("cycle", "icarus"), ("native", "verilator")]
)
def test_sim_switches_parameters_exactly(tmp_path, mode, simulator):
    """The emitted Verilog under every simulation mode: the engine starts with the given
    values and each switch, written to ``i_params`` before its tuple, takes effect there, as
    ``nfacep match`` says (``--check`` compares every record too)."""
    from nfacep.sim import build

    missing = build.simulator_available(simulator)
    if missing:
        pytest.fail(f"{missing} (CI installs it with tools/install-simulators.sh)")
    q, t = sim_files(tmp_path)
    engine = ["--store", "pipeline", "--partitions", "32"]
    assert (
        main(["match", q, "--input", t, "--output", str(tmp_path / "m.csv"), *engine, *SIM_VALUES])
        == 0
    )
    assert (
        main(
            [
                "sim",
                q,
                "--input",
                t,
                "--output",
                str(tmp_path / "s.csv"),
                *engine,
                *SIM_VALUES,
                "--mode",
                mode,
                "--simulator",
                simulator,
                "--check",
                "--build-dir",
                str(tmp_path / "cache"),
            ]
        )
        == 0
    )
    assert (tmp_path / "s.csv").read_text() == (tmp_path / "m.csv").read_text()
    summary = json.loads((tmp_path / "s.summary.json").read_text())
    assert summary["runtime_parameters"]["switches"][0] == {
        "seq": 300,
        "values": {"hot": 50, "zone": "b"},
    }
    fixed = tmp_path / "fixed.csv"
    assert main(["match", q, "--input", t, "--output", str(fixed), *engine, *SIM_VALUES[:8]]) == 0
    assert fixed.read_text() != (tmp_path / "m.csv").read_text()  # the switches matter


def test_verilog_takes_initial_values_only(tmp_path, capsys):
    q, _ = sim_files(tmp_path)
    out = str(tmp_path / "e.v")
    assert main(["verilog", q, "-o", out, *SIM_VALUES[:8]]) == 0
    side = json.loads((tmp_path / "e.json").read_text())
    rp = side["runtime_parameters"]
    assert rp["initial"] == {"hot": 10, "zone": "a", "lim": 1.0, "flag": True}
    assert [f["name"] for f in rp["fields"]] == ["hot", "zone", "lim", "flag"]
    assert rp["width"] == 16 + 2 + 32 + 1
    assert side["ports"]["i_params__payload"]["width"] == rp["width"] + 48
    assert side["ports"]["param_values"] == {"dir": "out", "width": rp["width"]}
    capsys.readouterr()
    assert main(["verilog", q, "-o", str(tmp_path / "f.v"), *SIM_VALUES]) == 2
    assert (
        "takes the values the engine starts with (name=value), not switches (@seq)"
        in capsys.readouterr().err
    )
    assert main(["verilog", q, "-o", str(tmp_path / "f.v")]) == 2
    assert "need values: --param hot=…" in capsys.readouterr().err
    assert not (tmp_path / "f.v").exists()


def test_board_commands(tmp_path, capsys):
    """``check --board`` and ``build`` take the values the engine starts with (build puts them
    in the report); ``run`` takes switches over both links (here it gets as far as opening the
    serial port, or asking a UDP address where no board answers)."""
    q, t = sim_files(tmp_path)
    initial = SIM_VALUES[:8]
    try:
        rc = main(["check", q, "--board", "ulx3s-85f", "--json", *initial])
    except SystemExit as e:
        pytest.skip(f"nfacep check --board is not available: exit {e.code}")
    out, err = capsys.readouterr()
    if "needs the boards package" in err:
        pytest.skip(err)
    assert rc == 0, err
    assert json.loads(out)["parameters"][2] == {"name": "lim", "type": "FLOAT32", "bits": 32}
    assert main(["check", q, "--board", "ulx3s-85f"]) == 2
    assert "need values: --param hot=…" in capsys.readouterr().err
    assert main(["check", q, "--board", "ulx3s-85f", *SIM_VALUES]) == 2
    assert "not switches (@seq)" in capsys.readouterr().err
    run = ["run", q, "--input", t, "--output", str(tmp_path / "r.csv"), *SIM_VALUES]
    assert main([*run, "--port", str(tmp_path / "no-port")]) == 2
    assert "cannot open the serial port" in capsys.readouterr().err
    assert main([*run, "--udp", "127.0.0.1:9", "--timeout", "0.3"]) == 2
    assert "no board answers at 127.0.0.1:9" in capsys.readouterr().err
    assert not (tmp_path / "r.csv").exists()


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(
        st.one_of(
            st.text(max_size=30),
            st.builds(
                lambda n, v, at: f"{n}={v}{at}",
                st.sampled_from(["hot", ":zone", "lim", "flag", "HOT", "x", ""]),
                st.one_of(
                    st.text(max_size=12),
                    st.integers(-(10**12), 10**12).map(str),
                    st.floats().map(str),
                    st.sampled_from(["a", "b", "true", "nan", "inf", "1e39", "-0.0"]),
                ),
                st.one_of(
                    st.just(""),
                    st.integers(-5, 10**30).map(lambda i: f"@{i}"),
                    st.text(max_size=5).map(lambda t: "@" + t),
                ),
            ),
        ),
        max_size=6,
    )
)
def test_hostile_param_values_get_clear_errors(texts):
    """Whatever ``--param`` says: values, or a UsageError; never another exception."""
    try:
        values = ParamValues.parse(TYPES, texts)
    except UsageError as err:
        assert str(err).startswith(("--param", "the queries' parameters need values"))
        assert len(str(err)) < 800
        return
    assert set(values.initial) == set(TYPES)
    values.columns(10)
    values.as_dict()
    values.packed(values.initial)


@pytest.mark.slow
def test_vectors_and_regress_take_starting_values(spark, tmp_path, capsys):
    """``vectors --param`` expects what ``match`` reports with those values and records them
    in the manifest; ``regress`` simulates the engine built with them and passes; other values
    are refused."""
    pytest.importorskip("pyspark")
    import pyarrow.parquet as pq

    q = tmp_path / "q.sql"
    q.write_text(
        "CREATE STREAM s (k UINT(16), e ENUM('A','B','C'), v UINT(8));\n"
        "QUERY q PARTITION k PATTERN (A B+ C) DEFINE A AS e = 'A', B AS v > :lo, "
        "C AS e = :last"
    )
    out = tmp_path / "vectors"
    values = ["--param", "lo=100", "--param", "last=C"]
    # local[2]: the Spark tests' session (the `spark` fixture), reused rather than started anew
    assert (
        main(
            [
                "vectors",
                str(q),
                "--tuples",
                "3000",
                "--keys",
                "20",
                "--out",
                str(out),
                "--master",
                "local[2]",
                "--quiet",
                *values,
            ]
        )
        == 0
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["runtime_parameters"] == {"lo": 100, "last": "C"}
    m = tmp_path / "m.csv"
    assert (
        main(["match", str(q), "--input", str(out / "tuples.parquet"), "--output", str(m), *values])
        == 0
    )
    want = sorted(
        (r["seq"], r["query"], r["partition"])
        for r in pq.read_table(out / "expected.parquet").to_pylist()
    )
    got = [
        (int(s), n, p) for s, n, p in (line.split(",") for line in m.read_text().splitlines()[1:])
    ]
    assert got == want and want
    capsys.readouterr()
    regress = ["regress", str(q), "--vectors", str(out), "--master", "local[2]", "--quiet"]
    assert main([*regress, "--build-dir", str(tmp_path / "cache")]) == 0
    assert "OK:" in capsys.readouterr().out
    assert main([*regress, "--param", "lo=3", "--param", "last=C"]) == 2
    assert "made with other runtime parameter values" in capsys.readouterr().err
    assert (
        main(
            [
                "vectors",
                str(q),
                "--tuples",
                "10",
                "--out",
                str(tmp_path / "v2"),
                "--master",
                "local[2]",
                "--quiet",
                "--param",
                "lo=1@5",
                "--param",
                "last=A",
            ]
        )
        == 2
    )
    assert "not switches (@seq)" in capsys.readouterr().err


def test_sim_refuses_verilog_emitted_with_other_values(tmp_path, capsys):
    """A Verilog file from ``nfacep verilog --param`` starts with its values: simulating it
    (``Simulation(SimOptions(engine=…))``, as ``regress`` does) with other values is refused
    before the simulator runs."""
    from nfacep import sim
    from nfacep.io import reader

    q, t = sim_files(tmp_path)
    engine = str(tmp_path / "e.v")
    assert main(["verilog", q, "-o", engine, *SIM_VALUES[:8]]) == 0
    nfa = nfacep.compile_file(q)
    data = reader.read(t, nfa.program.schema)
    other = ParamValues.parse(nfa.program.parameters, ["hot=11", "zone=a", "lim=1.0", "flag=true"])
    simulation = sim.Simulation(
        sim.SimOptions(simulator="icarus", engine=engine, build_dir=tmp_path / "cache")
    )
    with pytest.raises(UsageError, match="emitted with other runtime parameter values"):
        simulation.run(nfa, data, nfacep.params.default_engine(nfa), other)


def test_manifest_values_are_checked():
    pytest.importorskip("pyspark")
    from nfacep.spark_testbench.layout import manifest_values

    nfa = nfacep.compile_text(SIM_QUERY)
    with pytest.raises(
        UsageError,
        match=r"m\.json: no runtime_parameters for the queries' "
        r"parameters",
    ):
        manifest_values({}, nfa, "m.json")
    with pytest.raises(UsageError, match=r"m\.json: runtime_parameters: --param hot=99999"):
        manifest_values(
            {"runtime_parameters": {"hot": 99999, "zone": "a", "lim": 1.0, "flag": True}},
            nfa,
            "m.json",
        )
    got = manifest_values(
        {"runtime_parameters": {"hot": -5, "zone": "c", "lim": 0.1, "flag": False}}, nfa, "m.json"
    )
    assert got.initial == {"hot": -5, "zone": 2, "lim": float(np.float32(0.1)), "flag": False}


def test_unpacked_is_the_inverse_of_packed():
    """What a board reports (the packed values in force) reads back as the values given."""
    from nfacep.lang.types import BoolType, UIntType

    types = {
        "n": IntType(12),
        "z": EnumType(("a", "b", "c")),
        "f": Float32Type(),
        "b": BoolType(),
        "u": UIntType(32),
    }
    values = ParamValues.parse(types, ["n=-7", "z=c", "f=-1.5", "b=true", "u=4000000000"])
    packed = values.packed(values.initial)
    assert values.width() == 12 + 2 + 32 + 1 + 32
    assert values.unpacked(packed) == values.initial
    assert values.texts(values.unpacked(packed))["z"] == "c"
    assert ParamValues().width() == 0


def test_param_names_on_the_command_line_ignore_case():
    """--param follows the query's rule: an unquoted name matches ignoring case; "name" exactly."""
    types = compile_("QUERY q PATTERN (A) DEFINE A AS temp > :Hot AND TEMP < :HOT").program
    assert list(types.parameters) == ["Hot"]
    for text in ("hot=3", "HOT=3", ":Hot=3", '"Hot"=3'):
        assert ParamValues.parse(types.parameters, [text]).initial == {"Hot": 3}
    with pytest.raises(UsageError, match=r"no parameter :hot"):
        ParamValues.parse(types.parameters, ['"hot"=3'])
