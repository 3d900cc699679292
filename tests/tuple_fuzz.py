"""A seeded mutator over the bundled tuple files (``queries/*.csv``) and their Parquet
conversions, and the one property every mutant must keep: nfacep reads it, or refuses it with
its own error naming the file and, in a CSV file, the line.

Shared by ``tests/io/test_fuzz_tuples.py`` (a short run in the suite) and
``tests/fuzz_tuples.py`` (a long campaign in worker processes, with a time and memory bound
per input). Input ``i`` of seed ``s`` is a pure function of ``(s, i)``: any finding is
reproduced with ``python tests/fuzz_tuples.py --seed s --show i``.
"""

from __future__ import annotations

import functools
import io
import os
import pathlib
import random
import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from bundled import param_values

import nfacep
from nfacep.backend import read_input
from nfacep.errors import NfacepError
from nfacep.params import EngineParams
from nfacep.reference.matcher import Reference

QUERIES = pathlib.Path(__file__).resolve().parent.parent / "queries"

#: Values that have broken, or could break, a reader: signs, zeros, underscores, other
#: scripts' digits, out of range numbers, quotes, control and invalid bytes, huge texts.
TOKENS: list[bytes] = [
    b"",
    b" ",
    b"+0",
    b"-0",
    b"+5",
    b"-5",
    b"00",
    b"1_5",
    "\uff11\uff15".encode(),
    "\u0661\u0665".encode(),
    "\u00bd".encode(),
    b"1e40",
    b"-1e40",
    b"1e400",
    b"1e-400",
    b"3.4028235e38",
    b"3.4028236e38",
    b"inf",
    b"-Infinity",
    b"nan",
    b"NaN",
    b"0x10",
    b"1.5e",
    b".",
    b"-",
    b"+",
    b"e5",
    b"5.",
    b".5",
    b"18446744073709551615",
    b"18446744073709551616",
    b"-9223372036854775809",
    b"4294967296",
    b"65536",
    b"256",
    b"-129",
    b"true",
    b"FALSE",
    b"1",
    b"2",
    b"yes",
    b'"',
    b'""',
    b'"a""b"',
    b'"1',
    b'1"',
    b",",
    b",,",
    b"\n",
    b"\r",
    b"\r\n",
    b"\x00",
    b"\xff",
    b"\xfe\xff",
    b"\xef\xbb\xbf",
    b"\xc3",
    b"\x1b[2J",
    b"\t5\t",
    "\u00a05".encode(),
    "\u202e".encode(),
    b"9" * 5000,
    b"16777217." + b"0" * 5000 + b"1",
    b"x" * 70000,
    b"Staten Island",
    b"Queens ",
    b"SYN",
    b"OPENING",
    b"AISLE",
]


@dataclass(frozen=True)
class Seed:
    name: str
    query: str  #: the query file
    data: bytes  #: its tuple file


@functools.cache
def corpus() -> tuple[Seed, ...]:
    return tuple(
        Seed(p.stem, str(p.with_suffix(".sql")), p.read_bytes())
        for p in sorted(QUERIES.glob("*.csv"))
        if p.with_suffix(".sql").exists()
    )


@functools.cache
def compiled(query: str):
    return nfacep.compile_file(query)


# --- mutations ---------------------------------------------------------------------------------


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _field_edit(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    i = rng.randrange(len(lines))
    fields = lines[i].split(b",")
    j = rng.randrange(len(fields))
    fields[j] = rng.choice(TOKENS) if rng.random() < 0.8 else fields[j] + rng.choice(TOKENS)
    lines[i] = b",".join(fields)
    return b"\n".join(lines)


def _byte_edit(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return rng.choice(TOKENS)
    i = rng.randrange(len(data) + 1)
    op = rng.randrange(6)
    if op == 0:  # flip bits
        if i == len(data):
            i -= 1
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]
    if op == 1:  # insert a token
        return data[:i] + rng.choice(TOKENS) + data[i:]
    if op == 2:  # insert random bytes
        return data[:i] + rng.randbytes(rng.randrange(1, 16)) + data[i:]
    if op == 3:  # delete a range
        return data[:i] + data[i + rng.randrange(1, 64) :]
    if op == 4:  # duplicate a range
        j = rng.randrange(i, min(len(data), i + 200) + 1)
        return data[:j] + data[i:j] + data[j:]
    return data[:i]  # truncate


def _structure_edit(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    header = lines[0].split(b",")
    op = rng.randrange(9)
    if op == 0:  # a header column named twice
        header.insert(rng.randrange(len(header) + 1), rng.choice(header))
        lines[0] = b",".join(header)
    elif op == 1:  # header only, with or without the line end
        return lines[0] + rng.choice([b"", b"\n", b"\r\n", b"\n\n"])
    elif op == 2:  # a byte-order mark
        return b"\xef\xbb\xbf" + data
    elif op == 3:  # CRLF or CR line ends
        return data.replace(b"\n", rng.choice([b"\r\n", b"\r"]))
    elif op == 4:  # blank lines
        for _ in range(rng.randrange(1, 5)):
            lines.insert(rng.randrange(1, len(lines) + 1), rng.choice([b"", b"\r", b" "]))
    elif op == 5:  # swap two rows (breaks ORDER BY)
        if len(lines) > 3:
            a, b = rng.sample(range(1, len(lines) - 1), 2)
            lines[a], lines[b] = lines[b], lines[a]
    elif op == 6 and len(lines) > 1:  # drop or add a column in one row
        i = rng.randrange(1, len(lines))
        lines[i] = lines[i].rsplit(b",", 1)[0] if rng.random() < 0.5 else lines[i] + b",7"
    elif op == 7:  # quote a field, maybe without closing it
        i = rng.randrange(len(lines))
        fields = lines[i].split(b",")
        j = rng.randrange(len(fields))
        fields[j] = b'"' + fields[j] + (b'"' if rng.random() < 0.5 else b"")
        lines[i] = b",".join(fields)
    elif op == 8:  # binary garbage after some rows
        return (
            b"\n".join(lines[: rng.randrange(1, len(lines) + 1)])
            + b"\n"
            + rng.randbytes(rng.randrange(1, 300))
        )
    return b"\n".join(lines)


def mutate_csv(rng: random.Random, data: bytes) -> bytes:
    for _ in range(rng.choice([1, 1, 1, 2, 3, 5])):
        edit = rng.choice([_field_edit, _field_edit, _byte_edit, _structure_edit])
        data = edit(rng, data)
    return data


def _to_parquet(rng: random.Random, data: bytes) -> bytes | None:
    try:
        return _parquet_of(rng, data)
    except (pa.ArrowException, OSError, UnicodeDecodeError):  # binary, not text
        return None


def _parquet_of(rng: random.Random, data: bytes) -> bytes | None:
    """The CSV ``data`` as a Parquet file: every column as strings, or as pyarrow infers
    their types; sometimes a column renamed, repeated, dropped or emptied. None when pyarrow
    cannot read the CSV text at all."""
    try:
        table = pacsv.read_csv(io.BytesIO(data))
    except (pa.ArrowException, OSError):
        return None
    if rng.random() < 0.5:  # every column as strings, as a CSV value would be read
        table = pa.Table.from_arrays(
            [c.cast(pa.string()) for c in table.columns], names=table.column_names
        )
    names = list(table.column_names)
    if names and rng.random() < 0.3:
        op = rng.randrange(4)
        i = rng.randrange(len(names))
        if op == 0:
            names[i] = names[rng.randrange(len(names))]
            table = table.rename_columns(names)
        elif op == 1:
            table = table.remove_column(i)
        elif op == 2:
            table = table.append_column(names[i], table.column(i))
        else:
            table = table.set_column(i, names[i], pa.nulls(table.num_rows, table.column(i).type))
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=rng.choice([None, 1, 7, 64]))
    return sink.getvalue()


def mutant(seed: int, i: int) -> tuple[Seed, str, bytes]:
    """Input ``i`` of ``seed``: its corpus entry, its kind (``csv``, ``parquet``, or
    ``parquet-bytes``: a Parquet file with its bytes mutated) and its bytes."""
    rng = random.Random(f"nfacep-tuples:{seed}:{i}")
    base = rng.choice(corpus())
    kind = rng.choices(["csv", "parquet", "parquet-bytes"], weights=[70, 22, 8])[0]
    data = mutate_csv(rng, base.data) if rng.random() < 0.95 else base.data
    if kind == "csv":
        return base, kind, data
    pqdata = _to_parquet(rng, data) or _to_parquet(rng, base.data)
    if pqdata is None:
        return base, "csv", data
    if kind == "parquet-bytes":
        for _ in range(rng.randrange(1, 4)):
            pqdata = _byte_edit(rng, pqdata)
    return base, kind, pqdata


# --- the property ------------------------------------------------------------------------------


class NoPosition(AssertionError):
    """nfacep's own error, but without the file and position the contract promises."""


def check(seed: Seed, kind: str, data: bytes, folder: str) -> tuple[str, str]:
    """Read ``data`` as the tuple file of ``seed``'s query (and, when accepted, match it):
    ``("accepted", "")`` or ``("error", message)`` for nfacep's own error with a position.
    Raises :class:`NoPosition` for an error without one; anything else propagates (a crash).
    """
    path = os.path.join(folder, "t.csv" if kind == "csv" else "t.parquet")
    with open(path, "wb") as f:
        f.write(data)
    nfa = compiled(seed.query)
    try:
        tuples = read_input(path, nfa)
    except NfacepError as err:
        message = str(err)
        where_ok = message.startswith(path) and (
            kind != "csv" or "line " in message or "the file is empty" in message
        )
        if not where_ok:
            raise NoPosition(message) from None
        return "error", message
    finally:
        os.unlink(path)
    assert all(len(c) == tuples.n for c in tuples.columns.values())
    # downstream of the reader: the matcher with a small, ticking partitioner
    Reference().run(
        nfa,
        tuples,
        EngineParams(partitions=4, tick_tuples=3, timer_bits=2),
        param_values(seed.name, nfa),
    )
    return "accepted", ""


def timed(seed_value: int, i: int, folder: str) -> tuple[str, str, float]:
    base, kind, data = mutant(seed_value, i)
    start = time.perf_counter()
    outcome, message = check(base, kind, data, folder)
    return outcome, message, time.perf_counter() - start
