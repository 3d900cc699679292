"""Arrow tables to typed columns: values are converted column-wise with pyarrow; only when
a column fails is it scanned value by value, to name the first offending row. FLOAT32 values
are the nearest single to their decimal text.

A CSV file's string columns (``from_table(..., text=True)``) first try a fast path, chunk by
chunk without copying their text, that takes only the common spelling and checks it on the
bytes (:func:`_fast_strings`); a column it does not take, an error among them, goes the
exact path, which gives the same values or names the row. A CSV file read in pieces has its
numbers parsed typed by pyarrow where it can (:mod:`~nfacep.io.csvblocks`), so that only its
labels and its odd blocks come here as text. ``benchmarks/csv_read.py`` measures it against
pyarrow's own reader."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ..errors import DataError
from ..lang.types import (
    BoolType,
    EnumType,
    FieldType,
    Float32Type,
    IntType,
    Ipv4Type,
    TimestampType,
    UIntType,
)
from ..lang.values import (
    IPV4_TEXT,
    TIMESTAMP_TEXT,
    TIMESTAMP_UNITS,
    days_from_civil,
    days_in_month,
    fix_float32_rounding,
    parse_timestamp,
)
from ..schema import Schema
from .arrays import index_in, strings, to_numpy
from .tuples import EXCERPT, Location, Tuples, excerpt, where_row

__all__ = ["FLOAT32_MAX", "first_invalid", "first_null", "from_table", "value_bytes"]


def from_table(
    table: pa.Table,
    schema: Schema,
    source: str | Location = "<tuples>",
    *,
    text: bool = False,
) -> Tuples:
    """Convert an Arrow table (string columns from CSV, or typed columns) to :class:`Tuples`.

    ``text``: the table's strings are a CSV file's as pyarrow's reader made them, valid UTF-8
    (it checks), so that a column without an odd value converts chunk by chunk on the fast
    path (:func:`_fast_strings`); any other, and any column where the fast path meets
    something it does not take, is converted whole, on the exact path that names the row."""
    columns = {}
    for f in schema.fields:
        chunked = table.column(f.name)
        values = _fast_strings(chunked, f.type) if text else None
        if values is None:
            values = _convert(chunked.combine_chunks(), f.type, f.name, source)
        columns[f.name] = values
    location = source if isinstance(source, Location) else None
    return Tuples(columns, table.num_rows, str(source), location=location)


def first_invalid(mask: np.ndarray) -> int | None:
    bad = np.flatnonzero(~mask)
    return int(bad[0]) if len(bad) else None


def first_null(col: pa.Array) -> int:
    """The row of ``col``'s first empty value; ``col`` has one (``col.null_count``)."""
    return int(np.flatnonzero(to_numpy(col.is_null()))[0])


def _convert(col: pa.Array, ty: FieldType, name: str, source: str | Location) -> np.ndarray:
    if col.null_count:
        row = first_null(col)
        raise DataError(f"{where_row(source, row, name)}: empty value")
    if str(col.type) == "string_view":  # (pyarrow 16 on; Polars' to_arrow() makes them)
        col = col.cast(pa.large_string())
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        _check_utf8(col, name, source)
        return _from_strings(col, ty, name, source)
    return _from_typed(col, ty, name, source)


def _fast_strings(chunked: pa.ChunkedArray, ty: FieldType) -> np.ndarray | None:
    """The values of a string column of valid UTF-8 converted chunk by chunk (no copy of the
    text), when every value is of the common spelling: plain ASCII digits for an integer,
    printable ASCII without spaces and finite for FLOAT32, a label as it is for ENUM. None
    otherwise (an empty value, spaces, signs, infinities, BOOL, anything wrong): the exact
    path then reads the column whole, with the same result or the error naming the row."""
    if not pa.types.is_string(chunked.type) or chunked.null_count:
        return None
    if isinstance(ty, Ipv4Type | TimestampType):  # (integers in memory, not as text)
        return None
    parts = []
    for chunk in chunked.chunks:
        if isinstance(ty, UIntType | IntType):
            values = _plain_integers(chunk, ty)
        elif isinstance(ty, Float32Type):
            values = _plain_floats(chunk)
        elif isinstance(ty, EnumType):
            idx = index_in(chunk, ty.labels)
            values = None if idx.null_count else to_numpy(idx).astype(np.int64)
        else:
            return None
        if values is None:
            return None
        parts.append(values)
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return None
    return np.concatenate(parts)


def _plain_floats(chunk: pa.Array) -> np.ndarray | None:
    """FLOAT32 values of printable ASCII text without spaces, all finite: as the exact path
    makes them (there is nothing to trim); None for anything else."""
    import pyarrow.compute as pc

    if not _bytes_within(chunk, 0x21, 0x7E):
        return None
    try:
        doubles = to_numpy(pc.cast(chunk, pa.float64()))
    except pa.ArrowInvalid:
        return None
    with np.errstate(over="ignore"):
        singles = doubles.astype(np.float32)
    if not np.isfinite(singles).all():  # (NaN too: the exact path checks how it is written)
        return None
    # a double on the midpoint of two singles has a mantissa's low 28 bits zero (a single
    # has 24 significant bits, the midpoint one more); only those few are redone exactly
    maybe = np.flatnonzero((doubles.view(np.uint64) & np.uint64(0x0FFFFFFF)) == 0)
    if len(maybe):
        singles[maybe] = fix_float32_rounding(_Texts(chunk, maybe), doubles[maybe])
    return singles


def _check_utf8(col: pa.Array, name: str, source: str | Location) -> None:
    """A string column of a Parquet file may hold bytes that are not UTF-8 (Parquet does
    not check): name the first such row."""
    try:
        col.validate(full=True)
    except pa.ArrowInvalid:
        for row, value in enumerate(col.cast(pa.large_binary()).to_pylist()):
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                raise DataError(
                    f"{where_row(source, row, name)}: not UTF-8 text: {excerpt(value)}"
                ) from None
        raise DataError(f"{source}: column '{name}' is not valid text") from None


_INT_RE = r"^\s*[+-]?[0-9]+\s*$"


#: A FLOAT32 value as written in a tuple file (the syntax of a literal in a query, plus NaN
#: and infinities); ASCII digits only, as pyarrow reads them.
_FLOAT_RE = (
    r"^\s*[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|(?i:nan|inf|infinity))"
    r"\s*$"
)


_INF_RE = r"^[+-]?(?i:inf|infinity)$"
_NAN_RE = r"^[+-]?(?i:nan)$"


def _number(text: str) -> str:
    """An integer's text for a message: whole when short, else its start and its length."""
    return text if len(text) <= EXCERPT else f"{text[:EXCERPT]}… ({len(text)} digits)"


def _from_strings(col: pa.Array, ty: FieldType, name: str, source: str | Location) -> np.ndarray:
    if isinstance(ty, Ipv4Type):
        return _ipv4_from_strings(col, name, source)
    if isinstance(ty, TimestampType):
        return _timestamps_from_strings(col, ty, name, source)
    return _from_text(col, ty, name, source)


def _from_text(col: pa.Array, ty: FieldType, name: str, source: str | Location) -> np.ndarray:
    import pyarrow.compute as pc

    if isinstance(ty, UIntType | IntType):
        ok = to_numpy(pc.match_substring_regex(col, _INT_RE))
        row = first_invalid(ok)
        if row is not None:
            raise DataError(
                f"{where_row(source, row, name)}: {excerpt(col[row].as_py())} is not an "
                f"integer ({ty})"
            )
        plain = pc.utf8_trim_whitespace(col)
        target = pa.uint64() if isinstance(ty, UIntType) else pa.int64()
        try:
            values = to_numpy(pc.cast(plain, target))
        except (pa.ArrowInvalid, OverflowError):
            # pyarrow reads neither a '+' sign nor '-0' as an unsigned integer: drop both
            plain = pc.replace_substring_regex(plain, r"^\+", "")
            plain = pc.replace_substring_regex(plain, r"^-(0+)$", r"\1")
            try:
                values = to_numpy(pc.cast(plain, target))
            except (pa.ArrowInvalid, OverflowError):
                values = None
        if values is None or not _in_range(values, ty).all():
            texts = plain.to_pylist()
            row = _first_out_of_range(texts, ty)
            if row is None:  # in range, but not as pyarrow reads it: read it as Python does
                return np.array([int(t) for t in texts], dtype=target.to_pandas_dtype())
            lo, hi = ty.range
            raise DataError(
                f"{where_row(source, row, name)}: {_number(col[row].as_py().strip())} "
                f"does not fit {ty} ({lo}..{hi})"
            )
        return values
    if isinstance(ty, BoolType):
        lowered = pc.utf8_lower(pc.utf8_trim_whitespace(col))
        truthy = to_numpy(pc.is_in(lowered, value_set=strings(["true", "1"])))
        falsy = to_numpy(pc.is_in(lowered, value_set=strings(["false", "0"])))
        row = first_invalid(truthy | falsy)
        if row is not None:
            raise DataError(
                f"{where_row(source, row, name)}: {excerpt(col[row].as_py())} is not a "
                "BOOL (true, false, 1 or 0)"
            )
        return truthy
    if isinstance(ty, EnumType):
        idx = index_in(col, ty.labels)
        if idx.null_count:
            row = first_null(idx)
            raise DataError(
                f"{where_row(source, row, name)}: {excerpt(col[row].as_py())} is not a "
                f"label of {ty}"
            )
        return to_numpy(idx).astype(np.int64)
    assert isinstance(ty, Float32Type)
    return _floats_from_text(col, name, source)


def _floats_from_text(col: pa.Array, name: str, source: str | Location) -> np.ndarray:
    """A FLOAT32 column of text, each value rounded once to the nearest single; an error
    names the first value not written as a number, or beyond the single's range."""
    import pyarrow.compute as pc

    # printable ASCII without spaces (the usual text) has no whitespace to trim
    stripped = col if _bytes_within(col, 0x21, 0x7E) else pc.utf8_trim_whitespace(col)
    texts = _Texts(stripped)  # the text of a value, made when asked for (rarely)
    try:
        doubles = to_numpy(pc.cast(stripped, pa.float64()))
    except pa.ArrowInvalid:
        ok = to_numpy(pc.match_substring_regex(col, _FLOAT_RE))
        row = first_invalid(ok)
        if row is not None:
            _not_a_number(source, row, name, col)
        # decimal text that pyarrow cannot read (none known): Python reads it alike
        doubles = np.array([float(t) for t in stripped.to_pylist()], dtype=np.float64)
    nan = np.isnan(doubles)
    if nan.any():  # pyarrow reads C's nan(…) too, which the syntax above does not take
        row = first_invalid(~nan | to_numpy(pc.match_substring_regex(stripped, _NAN_RE)))
        if row is not None:
            _not_a_number(source, row, name, col)
    singles = fix_float32_rounding(texts, doubles)
    inf = np.isinf(singles)
    if inf.any():
        written = to_numpy(pc.match_substring_regex(stripped, _INF_RE))
        row = first_invalid(~inf | written)
        if row is not None:
            _out_of_float32(source, row, name, excerpt(texts[row]))
    return singles


def _not_a_number(source: str | Location, row: int, name: str, col: pa.Array):
    raise DataError(
        f"{where_row(source, row, name)}: {excerpt(col[row].as_py())} is not a number (FLOAT32)"
    )


class _Texts(Sequence[str]):
    """The values of a string column as Python strings, one at a time on demand (a FLOAT32
    value's text is needed only when its double lies on a midpoint between two singles, and
    for an error message): making them all would cost more than the conversion."""

    def __init__(self, col: pa.Array, rows: np.ndarray | None = None):
        self.col = col
        self.rows = rows  #: the rows of ``col`` asked for as 0, 1, …; None: all of them

    def __len__(self) -> int:
        return len(self.col) if self.rows is None else len(self.rows)

    def __getitem__(self, row):  # (one value: fix_float32_rounding asks for no slice)
        row = int(row) if self.rows is None else int(self.rows[row])
        return self.col[row].as_py()


def value_bytes(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string column's offsets (one more than its values) and the bytes of its values, as
    numpy views of its buffers (no copy)."""
    kind = np.int64 if pa.types.is_large_string(col.type) else np.int32
    _, offsets_buf, data_buf = col.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=kind)[col.offset : col.offset + len(col) + 1]
    if data_buf is None or not len(col):
        return offsets, np.zeros(0, dtype=np.uint8)
    data = np.frombuffer(data_buf, dtype=np.uint8)[offsets[0] : offsets[-1]]
    return offsets, data


def _bytes_within(col: pa.Array, lo: int, hi: int) -> bool:
    """Whether every byte of every value of the string column is within ``lo..hi``."""
    _, data = value_bytes(col)
    return not len(data) or (int(data.min()) >= lo and int(data.max()) <= hi)


def _plain_integers(col: pa.Array, ty: UIntType | IntType) -> np.ndarray | None:
    """The fast path of an integer column: when every value is ASCII digits only (with a
    leading '-' for INT), none empty and all in the type's range, its values; otherwise
    None, and the exact path (spaces, signs, wider digits) reads it or names its error."""
    import pyarrow.compute as pc

    offsets, data = value_bytes(col)
    if not len(col) or not (np.diff(offsets) > 0).all():
        return None
    if not _bytes_within(col, ord("0"), ord("9")):  # (two reductions, no array made)
        if not isinstance(ty, IntType):
            return None
        odd = (data - np.uint8(48)) > np.uint8(9)
        starts = offsets[:-1] - offsets[0]
        odd[starts] &= data[starts] != ord("-")  # INT: a '-' may lead
        if odd.any():
            return None
    target = pa.uint64() if isinstance(ty, UIntType) else pa.int64()
    try:
        values = to_numpy(pc.cast(col, target))
    except (pa.ArrowInvalid, OverflowError):
        return None
    return values if _in_range(values, ty).all() else None


#: The largest finite FLOAT32.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _out_of_float32(source: str | Location, row: int, name: str, value: str):
    raise DataError(
        f"{where_row(source, row, name)}: {value} is beyond the range of FLOAT32 "
        f"(±{FLOAT32_MAX:.8g}); write inf for an infinity"
    )


def _in_range(values: np.ndarray, ty) -> np.ndarray:
    lo, hi = ty.range
    if values.dtype == np.uint64:
        return values <= np.uint64(hi)
    return (values >= lo) & (values <= hi)


def _first_out_of_range(texts: list[str], ty) -> int | None:
    lo, hi = ty.range
    for row, text in enumerate(texts):
        # more digits than any 64-bit value has is out of range (and beyond int()'s limit)
        if len(text.lstrip("-").lstrip("0")) > 24 or not lo <= int(text) <= hi:
            return row
    return None


def _ipv4_from_strings(col: pa.Array, name: str, source: str | Location) -> np.ndarray:
    """Dotted quads (blanks around them ignored, as around numbers) as 32-bit values."""
    import pyarrow.compute as pc

    plain = pc.utf8_trim_whitespace(col)
    ok = to_numpy(pc.match_substring_regex(plain, f"^{IPV4_TEXT}$"))
    row = first_invalid(ok)
    if row is not None:
        raise DataError(
            f"{where_row(source, row, name)}: {excerpt(col[row].as_py())} is not an IPv4 "
            "address (IPV4: four decimal octets 0..255 without leading zeros, as 10.1.2.3)"
        )
    octets = to_numpy(pc.cast(pc.list_flatten(pc.split_pattern(plain, ".")), pa.uint64()))
    octets = octets.reshape(-1, 4)
    out = np.zeros(len(col), dtype=np.uint64)
    for i in range(4):
        out |= octets[:, i] << np.uint64(24 - 8 * i)
    return out


def _timestamps_from_strings(
    col: pa.Array, ty: TimestampType, name: str, source: str | Location
) -> np.ndarray:
    """ISO 8601 text (blanks around it ignored) as counts of the field's unit, in UTC: computed
    column-wise; a row that fails there (not ISO 8601, not a day, finer than the unit, at the
    ends of the range) is read alone by :func:`nfacep.lang.values.parse_timestamp`, which
    either gives its exact value or says what is wrong with it."""
    import pyarrow.compute as pc

    plain = pc.utf8_trim_whitespace(col)
    found = pc.extract_regex(plain, f"^{TIMESTAMP_TEXT}$")
    n = len(col)

    def part(key: str) -> np.ndarray:
        text = pc.if_else(pc.equal(found.field(key), ""), "0", found.field(key))
        return to_numpy(pc.cast(pc.fill_null(text, "0"), pa.int64()))

    year, month, day = part("year"), part("month"), part("day")
    hour, minute, second = part("hour"), part("minute"), part("second")
    zh, zm = part("zh"), part("zm")
    fraction = pc.fill_null(pc.utf8_rpad(found.field("fraction"), width=9, padding="0"), "0")
    nanos = to_numpy(pc.cast(fraction, pa.int64()))
    minus = pc.fill_null(pc.equal(found.field("sign"), "-"), False)
    sign = np.where(to_numpy(minus), -1, 1)
    per = TIMESTAMP_UNITS[ty.unit]
    ok = (
        to_numpy(pc.is_valid(found))
        & (month >= 1) & (month <= 12) & (day >= 1)
        & (day <= days_in_month(year, np.clip(month, 1, 12)))
        & (hour <= 23) & (minute <= 59) & (second <= 59) & (zh <= 23) & (zm <= 59)
        & (nanos % per == 0)
    )  # fmt: skip
    seconds = days_from_civil(year, np.clip(month, 1, 12), day) * 86400
    seconds += hour * 3600 + minute * 60 + second - sign * (zh * 3600 + zm * 60)
    scale = 10**9 // per
    bound = (1 << 63) // scale - 1
    ok &= (seconds > -bound) & (seconds < bound)  # the product below cannot overflow
    values = np.where(ok, seconds, 0) * scale + nanos // per
    texts = None
    for row in np.flatnonzero(~ok)[:n].tolist():
        texts = texts if texts is not None else plain.to_pylist()
        try:
            values[row] = parse_timestamp(texts[row], ty.unit)
        except ValueError as err:
            raise DataError(
                f"{where_row(source, row, name)}: {excerpt(col[row].as_py())} {err}"
            ) from None
    return values


#: nanoseconds in a unit of an Arrow timestamp
_ARROW_UNITS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


def _from_timestamps(col: pa.Array, ty: TimestampType, name: str, source) -> np.ndarray:
    """An Arrow (Parquet) timestamp column, of any unit, as counts of the field's unit: exact
    or an error naming the first row that is finer than the unit or beyond its range."""
    have, want = _ARROW_UNITS[col.type.unit], TIMESTAMP_UNITS[ty.unit]
    values = to_numpy(col.cast(pa.int64()))
    if have >= want:  # coarser or the same: multiply, within range
        factor = have // want
        ok = np.abs(values) <= ((1 << 63) - 1) // factor
        why = f"is beyond the range of {ty} (a signed 64-bit count of {ty.unit.lower()}s)"
        out = np.where(ok, values, 0) * factor
    else:
        factor = want // have
        ok = values % factor == 0
        why = f"is finer than a {ty.unit.lower()}, the unit of {ty}"
        out = values // factor
    row = first_invalid(ok)
    if row is not None:
        raise DataError(f"{where_row(source, row, name)}: {col[row].as_py()} {why}")
    return out


def _from_typed(col: pa.Array, ty: FieldType, name: str, source: str | Location) -> np.ndarray:
    t = col.type
    if isinstance(ty, TimestampType) and pa.types.is_timestamp(t):
        return _from_timestamps(col, ty, name, source)
    if isinstance(ty, UIntType | IntType) and pa.types.is_integer(t):
        values = to_numpy(col)
        info = np.iinfo(values.dtype)
        lo, hi = ty.range
        if not lo <= info.min <= info.max <= hi:  # (else every value of the column's type fits)
            ok = (
                _in_range(values.astype(object), ty)
                if values.dtype == np.uint64 and isinstance(ty, IntType)
                else _in_range(values, ty)
            )
            row = first_invalid(np.asarray(ok, dtype=bool))
            if row is not None:
                raise DataError(
                    f"{where_row(source, row, name)}: {values[row]} does not fit {ty} ({lo}..{hi})"
                )
        return values.astype(np.uint64 if isinstance(ty, UIntType) else np.int64)
    if isinstance(ty, BoolType) and pa.types.is_boolean(t):
        return to_numpy(col).astype(bool)
    if isinstance(ty, Float32Type) and pa.types.is_floating(t):
        values = to_numpy(col)
        with np.errstate(over="ignore"):
            singles = values.astype(np.float32)
        row = first_invalid(np.isfinite(singles) | ~np.isfinite(values))
        if row is not None:
            _out_of_float32(source, row, name, str(values[row]))
        return singles
    if isinstance(ty, Float32Type | BoolType | UIntType | IntType) and pa.types.is_integer(t):
        if isinstance(ty, Float32Type):
            return to_numpy(col).astype(np.float32)
        if isinstance(ty, BoolType):
            values = to_numpy(col)
            row = first_invalid((values == 0) | (values == 1))
            if row is not None:
                raise DataError(f"{where_row(source, row, name)}: {values[row]} is not a BOOL")
            return values.astype(bool)
    if pa.types.is_dictionary(t):
        # each distinct value once (the conversion is value by value); when one fails, which
        # may be a value no row uses, the decoded column says whether and where
        try:
            values = _convert(col.dictionary, ty, name, source)
        except DataError:
            return _convert(col.dictionary_decode(), ty, name, source)
        return values[to_numpy(col.indices)]
    raise DataError(f"{source}: column '{name}' has type {t}, which cannot hold a {ty} field")
