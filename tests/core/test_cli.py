"""The command line: exit codes, error rendering, and whole-or-nothing output."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from nfacep.cli import main

QUERY = """CREATE STREAM s (ts UINT(16), k UINT(8), a UINT(4));
QUERY q PARTITION k ORDER BY ts PATTERN (A B) DEFINE A AS a = 1 B AS a = 2;
"""


def setup(tmp_path, query=QUERY, data="ts,k,a\n1,1,1\n2,2,1\n3,1,2\n4,3,1\n5,2,2\n"):
    q = tmp_path / "q.sql"
    q.write_text(query)
    t = tmp_path / "t.csv"
    t.write_text(data)
    return str(q), str(t), str(tmp_path / "m.csv")


def test_match_writes_matches_and_summary(tmp_path, capsys):
    q, t, m = setup(tmp_path)
    assert (
        main(["match", q, "--input", t, "--output", m, "--store", "pipeline", "--partitions", "2"])
        == 0
    )
    # keys 1 and 2 fill both elements; key 3 (seq 3) is dropped
    assert pathlib.Path(m).read_text() == "seq,query,partition\n2,q,1\n4,q,2\n"
    summary = json.loads((tmp_path / "m.summary.json").read_text())
    assert summary["tuples"] == 5 and summary["matches"] == {"q": 2}
    assert summary["drops"] == 1 and summary["drop_seqs"] == [3]
    err = capsys.readouterr().err
    assert "1 tuples dropped" in err and "at seq 3" in err


def test_a_pipe_as_input_is_refused(tmp_path, capsys):
    """``… | nfacep match Q --input /dev/stdin`` and a FIFO: refused with the input's name,
    exit 2, nothing written (the pipe's header was read, then the file read again and found
    empty: "the file is empty"; a FIFO without a writer was waited for forever)."""
    q, t, m = setup(tmp_path)
    data = pathlib.Path(t).read_bytes()
    argv = ["match", q, "--input", "/dev/stdin", "--output", m]
    done = subprocess.run(
        [sys.executable, "-m", "nfacep", *argv], input=data, capture_output=True, timeout=300
    )
    assert done.returncode == 2
    assert done.stderr.decode().startswith("nfacep: /dev/stdin: not a regular file (a pipe")
    fifo = tmp_path / "f.csv"
    os.mkfifo(fifo)
    assert main(["match", q, "--input", str(fifo), "--output", m]) == 2
    assert f"nfacep: {fifo}: not a regular file" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.csv", "q.sql", "t.csv"]
    with open(t, "rb") as f:  # a regular file on the standard input is one
        done = subprocess.run([sys.executable, "-m", "nfacep", *argv], stdin=f, timeout=300)
    assert done.returncode == 0 and pathlib.Path(m).read_text().count("\n") == 3


def test_a_parquet_folder_through_a_link_to_an_empty_folder(tmp_path, capsys):
    """``--output M/`` where ``M`` links to an empty folder: the matches in the folder it names,
    the link kept, the summary beside ``M`` (a traceback: the link was removed as a folder)."""
    import pyarrow.parquet as pq

    q, t, _ = setup(tmp_path)
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "M"
    link.symlink_to(real)
    assert main(["match", q, "--input", t, "--output", f"{link}/"]) == 0
    assert link.is_symlink() and sorted(os.listdir(real)) == ["part-00000.parquet"]
    assert pq.read_table(link).column("seq").to_pylist() == [2, 4]
    assert json.loads((tmp_path / "M.summary.json").read_text())["matches"] == {"q": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "M",
        "M.summary.json",
        "q.sql",
        "real",
        "t.csv",
    ]


def test_query_error_exit_2_and_nothing_written(tmp_path, capsys):
    q, t, m = setup(tmp_path, query=QUERY.replace("a = 2", "a = 20"))
    assert main(["match", q, "--input", t, "--output", m]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{q}:2:") and "does not fit field 'a' UINT(4)" in err
    assert "^" in err and "Traceback" not in err
    assert not (tmp_path / "m.csv").exists()


def test_data_error_keeps_existing_output(tmp_path, capsys):
    q, t, m = setup(tmp_path, data="ts,k,a\n1,1,1\n0,1,2\n")
    pathlib.Path(m).write_text("previous\n")
    assert main(["match", q, "--input", t, "--output", m]) == 2
    assert "row 2 (line 3), column 'ts'" in capsys.readouterr().err
    assert pathlib.Path(m).read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.csv", "q.sql", "t.csv"]


def test_bad_parameters_and_missing_files(tmp_path, capsys):
    q, t, m = setup(tmp_path)
    assert (
        main(["match", q, "--input", t, "--output", m, "--store", "pipeline", "--partitions", "0"])
        == 2
    )
    assert "--partitions must be at least 1" in capsys.readouterr().err
    assert main(["match", q, "--input", str(tmp_path / "none.csv"), "--output", m]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["check", str(tmp_path / "none.sql")]) == 2
    assert "cannot read the query file" in capsys.readouterr().err
    assert main(["match", q, "--input", t, "--output", str(tmp_path / "no" / "m.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_check_and_explain(tmp_path, capsys):
    q, _, _ = setup(tmp_path)
    assert main(["check", q]) == 0
    out = capsys.readouterr().out
    assert "partition key: k" in out and "p0: a = 1" in out and "query q: 2 NFA states" in out
    assert "  st0_A [p0] start\n  st1_B [p1] accept\n" in out
    dot = tmp_path / "nfa.dot"
    assert main(["explain", q, "--dot", str(dot)]) == 0
    out = capsys.readouterr().out
    assert "pattern: seq{A,B}" in out and "st1_B [p1] <- {st0_A} accept" in out
    assert dot.read_text().startswith("digraph nfa {") and '"st0_A" -> "st1_B";' in dot.read_text()


KEYS_QUERY = """CREATE STREAM s (k UINT(2), j INT(3), a UINT(4));
SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k, j AFTER MATCH REPORT EVERY END
    PATTERN (A B) DEFINE A AS a = 1, B AS a = 2) AS q;
"""


def test_several_key_fields_through_the_commands(tmp_path, capsys):
    """check, check --json and explain show each key field and its bits; match writes a
    column per field, and tuples that share k but not j are in different partitions."""
    data = "k,j,a\n1,-1,1\n1,2,1\n1,-1,2\n3,-4,1\n1,2,2\n3,-4,2\n"
    q, t, m = setup(tmp_path, KEYS_QUERY, data)
    assert main(["check", q]) == 0
    assert "partition key: k (key bits 4..3), j (key bits 2..0)\n" in capsys.readouterr().out
    assert main(["check", q, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["partition_key"] == "k, j"
    assert doc["partition_fields"] == [
        {"name": "k", "offset": 3, "bits": 2},
        {"name": "j", "offset": 0, "bits": 3},
    ]
    assert main(["explain", q]) == 0
    assert "partition key: k (key bits 4..3), j (key bits 2..0)\n" in capsys.readouterr().out
    assert main(["match", q, "--input", t, "--output", m]) == 0
    assert pathlib.Path(m).read_text() == (
        "seq,query,partition_k,partition_j\n2,q,1,-1\n4,q,1,2\n5,q,3,-4\n"
    )
    # a table of 32 entries: the 5-bit key is the entry's index, the same matches
    pipeline = pathlib.Path(m).read_text()
    assert (
        main(["match", q, "--input", t, "--output", m, "--store", "table", "--partitions", "32"])
        == 0
    )
    assert pathlib.Path(m).read_text() == pipeline


def test_warning_goes_to_stderr_and_does_not_fail(tmp_path, capsys):
    q, _, _ = setup(tmp_path, query=QUERY.replace("a = 2;", "a = 2 Z AS a = 3;"))
    assert main(["check", q]) == 0
    assert "warning: DEFINE Z is never used" in capsys.readouterr().err


def test_match_reads_a_vectors_style_parquet_folder(tmp_path, capsys):
    """`--input` may be a folder of Parquet part files as `nfacep vectors` writes its
    tuples.parquet/: a seq column, Spark's typed columns, part files holding scattered seqs
    (hash-partitioned by key), checksums and _SUCCESS. The matches equal the CSV's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from nfacep import compile_file
    from nfacep.io import reader

    root = pathlib.Path(__file__).resolve().parents[2] / "queries"
    q, csv = str(root / "marathon.sql"), str(root / "marathon.csv")
    schema = compile_file(q).program.schema
    data = reader.read(csv, schema)
    labels = schema.field("checkpoint").type.labels
    table = pa.table(
        {
            "seq": pa.array(range(data.n), pa.int64()),
            "time": pa.array(data.columns["time"].astype("int64")),
            "checkpoint": [labels[i] for i in data.columns["checkpoint"]],
            "runner": pa.array(data.columns["runner"].astype("int64")),
            "speed": pa.array(data.columns["speed"], pa.float32()),
        }
    )
    folder = tmp_path / "v" / "tuples.parquet"
    folder.mkdir(parents=True)
    for k in range(3):  # part k holds the runners with runner % 3 == k, newest first
        rows = [i for i in reversed(range(data.n)) if data.columns["runner"][i] % 3 == k]
        name = f"part-{k:05d}-1d3dae03-bdad-4709-b7a5-464c06cbf5cc-c000.snappy.parquet"
        pq.write_table(
            table.take(pa.array(rows, pa.int64())), str(folder / name), compression="snappy"
        )
        (folder / f".{name}.crc").write_bytes(b"\x00")
    (folder / "_SUCCESS").write_text("")
    for params in (
        [],
        ["--store", "pipeline", "--partitions", "8", "--tick-tuples", "5", "--timer-bits", "2"],
    ):
        a, b = tmp_path / "csv.csv", tmp_path / "folder.csv"
        assert main(["match", q, "--input", csv, "--output", str(a), *params]) == 0
        assert main(["match", q, "--input", str(folder), "--output", str(b), *params]) == 0
        assert b.read_text() == a.read_text()
        sa = json.loads((tmp_path / "csv.summary.json").read_text())
        sb = json.loads((tmp_path / "folder.summary.json").read_text())
        assert sb.pop("input") == str(folder) and sa.pop("input") == csv
        assert sa == sb and sa["tuples"] == 278
        assert (sa["matches"]["cheat"] > 0) if not params else sa["drops"] > 0
    capsys.readouterr()


def test_every_registered_command_loads():
    """The outer packages' subcommands come from entry points (nfacep.commands), in the
    stages' order, and all of them load in this installation."""
    from nfacep import cli

    found = cli.commands()
    assert [c.name for c in found] == [
        "check",
        "explain",
        "match",
        "verilog",
        "sim",
        "vectors",
        "regress",
        "build",
        "run",
        "serve",
        "load",
    ]
    assert not [c.name for c in found if c.help.startswith("(unavailable")]


def test_a_broken_command_package_does_not_break_the_others(monkeypatch, capsys, tmp_path):
    from importlib import metadata

    real = metadata.entry_points

    def entry_points(**kw):
        broken = metadata.EntryPoint(
            name="widget", value="nfacep_no_such_package.cli:Widget", group=kw.get("group", "")
        )
        return [*real(**kw), broken]

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "widget" in out and "unavailable: ModuleNotFoundError" in out and "match" in out
    assert main(["widget", "x", "--y"]) == 2
    assert "`nfacep widget` is not available in this installation" in capsys.readouterr().err
    q, t, m = setup(tmp_path)
    assert main(["match", q, "--input", t, "--output", m]) == 0


def test_ctrl_c_while_the_compiler_loads_is_an_interrupted_command(monkeypatch, capsys):
    """The entry point catches a Ctrl-C that comes while nfacep.cli is being imported (before
    nfacep.cli.main can): one line, exit 130; and importing the package loads no compiler."""
    import subprocess
    import sys
    import types

    from nfacep import entry

    class Interrupted(types.ModuleType):
        def __getattr__(self, name):
            raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "nfacep.cli", Interrupted("nfacep.cli"))
    with pytest.raises(SystemExit) as exit_:
        entry.main()
    assert exit_.value.code == 130
    assert capsys.readouterr().err == "nfacep: interrupted\n"
    probe = (
        "import sys, nfacep; print(sorted(m for m in ('lark', 'nfacep.lang.check', "
        "'nfacep.nfa', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_python_dash_m_nfacep_is_the_command(tmp_path):
    """``python -m nfacep`` runs the command as the ``nfacep`` script does: its exit code, its
    output and its one-line errors."""
    import subprocess
    import sys

    q, t, m = setup(tmp_path)
    run = [sys.executable, "-m", "nfacep"]
    done = subprocess.run([*run, "match", q, "--input", t, "--output", m], capture_output=True)
    assert done.returncode == 0 and pathlib.Path(m).read_text().startswith("seq,")
    bad = subprocess.run([*run, "check", str(tmp_path / "none.sql")], capture_output=True)
    assert bad.returncode == 2 and bad.stderr.decode().startswith("nfacep: ")
    assert b"Traceback" not in bad.stderr


def test_names_in_another_case_are_the_declared_ones(tmp_path, capsys):
    """Issue 27: R and Hot are r and hot (SQL's unquoted names ignore case). They used to be
    undefined, true for every tuple: the query reported seq 2 and 5, noise, with nothing but a
    warning that DEFINE r is never used."""
    query = (
        "CREATE STREAM s (temp UINT(16), dtemp INT(8));\n"
        "SELECT * FROM s MATCH_RECOGNIZE (AFTER MATCH SKIP PAST LAST ROW\n"
        "    PATTERN (R{2} Hot) DEFINE r AS dtemp > 0, hot AS temp > 1000) AS Q;\n"
    )
    data = "temp,dtemp\n10,1\n20,1\n2000,1\n2000,-1\n20,1\n30,1\n2000,1\n"
    q, t, m = setup(tmp_path, query, data)
    assert main(["match", q, "--input", t, "--output", m]) == 0
    assert pathlib.Path(m).read_text() == "seq,query,partition\n2,Q,\n6,Q,\n"
    assert "warning" not in capsys.readouterr().err


def test_sql_form_defaults_to_skip_past_last_row(tmp_path, capsys):
    """Without AFTER MATCH the SQL form reports the earliest end and restarts after it, the
    paper's form every end; check says which."""
    query = (
        "CREATE STREAM s (a UINT(4));\n"
        "SELECT * FROM s MATCH_RECOGNIZE (PATTERN (A B+) DEFINE A AS a = 1, B AS a = 2) AS sql;\n"
        "QUERY paper PATTERN (A B+) DEFINE A AS a = 1, B AS a = 2;\n"
    )
    q, t, m = setup(tmp_path, query, "a\n1\n2\n2\n2\n1\n1\n2\n")
    assert main(["match", q, "--input", t, "--output", m]) == 0
    assert pathlib.Path(m).read_text() == (
        "seq,query,partition\n1,paper,\n1,sql,\n2,paper,\n3,paper,\n6,paper,\n6,sql,\n"
    )
    capsys.readouterr()
    assert main(["check", q]) == 0
    out = capsys.readouterr().out
    assert "query sql: 2 NFA states, AFTER MATCH SKIP PAST LAST ROW" in out
    assert "query paper: 2 NFA states, every match end" in out
