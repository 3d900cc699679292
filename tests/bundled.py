"""The bundled example queries (``queries/``): the runtime parameters' values their data are
planted for (``queries/parameters.json``), as every command and API takes them."""

from __future__ import annotations

import json
import pathlib

QUERIES = pathlib.Path(__file__).resolve().parents[1] / "queries"
VALUES: dict[str, dict[str, str]] = json.loads((QUERIES / "parameters.json").read_text())


def param_args(name: str) -> list[str]:
    """``--param name=value`` for each parameter of the bundled query file ``name``."""
    return [
        arg
        for param, value in VALUES.get(name, {}).items()
        for arg in ("--param", f"{param}={value}")
    ]


def param_texts(query) -> list[str]:
    """``name=value`` of each parameter of a bundled query file (a path; none for others)."""
    return [f"{p}={v}" for p, v in VALUES.get(pathlib.Path(query).stem, {}).items()]


def param_values(name: str, nfa):
    """The values as :class:`nfacep.settings.ParamValues` (None without parameters)."""
    from nfacep.settings import ParamValues

    if not nfa.program.parameters:
        return None
    return ParamValues.parse(
        nfa.program.parameters, [f"{p}={v}" for p, v in VALUES.get(name, {}).items()]
    )


def board_setup(name: str, kwargs: dict, folder: pathlib.Path = QUERIES):
    """What a test's software board is made of, for either link: the bundled query ``name``'s
    NFA, the engine ``build`` makes with the options ``kwargs`` names (``partitions``,
    ``tick_tuples``, ``timer_bits``; the default engine without any) and the values of its
    runtime parameters (the bundled ones unless ``kwargs["values"]``, ``--param`` texts, says
    otherwise); those options are taken out of ``kwargs``, the rest left for the model."""
    from nfacep import compile_file
    from nfacep.params import EngineParams, default_engine
    from nfacep.settings import ParamValues

    given = {
        k: kwargs.pop(k) for k in list(kwargs) if k in ("partitions", "tick_tuples", "timer_bits")
    }
    nfa = compile_file(folder / f"{name}.sql")
    texts = kwargs.pop("values", None)
    values = (
        param_values(name, nfa)
        if texts is None
        else ParamValues.parse(nfa.program.parameters, texts)
    )
    engine = EngineParams(**given) if given else default_engine(nfa)
    return nfa, engine, values


def keyed_fire(folder: pathlib.Path) -> pathlib.Path:
    """fire.sql partitioned by two fields, a new ``site UINT(2)`` and ``sensor``, written to
    ``folder`` as ``fire2.sql`` (returned), and fire's tuples with that site as ``fire2.csv``:
    a site that moves on after tuple 250, so that some sensors' tuples fall in two
    partitions (for the tests of several partition fields)."""
    text = (QUERIES / "fire.sql").read_text()
    text = text.replace("    sensor  UINT(16),", "    site    UINT(2),\n    sensor  UINT(16),")
    text = text.replace("PARTITION sensor\n", "PARTITION site, sensor\n")
    text = text.replace("PARTITION BY sensor\n", "PARTITION BY site, sensor\n")
    assert text.count("site, sensor") == 2
    path = folder / "fire2.sql"
    path.write_text(text)
    lines = (QUERIES / "fire.csv").read_text().splitlines()
    rows = [lines[0].replace("ts,sensor,", "ts,site,sensor,")]
    for n, line in enumerate(lines[1:]):
        ts, sensor, rest = line.split(",", 2)
        rows.append(f"{ts},{(int(sensor) + n // 250) % 4},{sensor},{rest}")
    (folder / "fire2.csv").write_text("\n".join(rows) + "\n")
    return path


def reference(
    tmp_path, name: str, *params: str, folder: pathlib.Path = QUERIES
) -> tuple[str, dict]:
    """``nfacep match`` of the query file ``folder/name.sql`` on ``folder/name.csv`` with the
    options ``params``, into ``tmp_path``: the match file's text and its summary (what every
    back-end's run of the same file is compared with)."""
    from nfacep.cli import main

    out = tmp_path / "reference.csv"
    assert (
        main(
            [
                "match",
                str(folder / f"{name}.sql"),
                "--input",
                str(folder / f"{name}.csv"),
                "--output",
                str(out),
                *params,
            ]
        )
        == 0
    )
    return out.read_text(), json.loads((tmp_path / "reference.summary.json").read_text())
