"""Runtime parameters' values: ``--param name=value`` and ``--param name=value@seq``.

A query may write ``:name`` in place of a constant in DEFINE (``H AS temp > :hot``); the
parameter takes the type of the field it is compared with (:attr:`nfacep.schema.Program.
parameters`). Its value is not part of the query: it is given when the engine is modelled or
built, and may change while the engine runs, from a stated tuple on. :class:`ParamValues` is
that schedule: the values in force from tuple 0, and the switches, each a set of new values
that applies from tuple ``seq`` on (all of them at once, between tuples ``seq - 1`` and
``seq``, as the gateware switches its registers).

Values are written as in tuple files (docs/formats.md): an integer for UINT and INT, a decimal
number for FLOAT32 (rounded to the nearest FLOAT32), a label for ENUM, ``true`` or ``false``
for BOOL, a dotted quad for IPV4, an ISO 8601 time (or a day) for TIMESTAMP.
"""

from __future__ import annotations

import argparse
import difflib
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import UsageError
from .lang.predicates import column_of
from .lang.types import (
    BoolType,
    EnumType,
    FieldType,
    Float32Type,
    IntType,
    Ipv4Type,
    TimestampType,
    UIntType,
)
from .lang.values import (
    decimal_to_float32,
    format_ipv4,
    format_timestamp,
    parse_ipv4,
    parse_timestamp,
)

if TYPE_CHECKING:  # numpy is loaded where values become columns, not for `nfacep check`
    import numpy as np

__all__ = ["ParamValues", "add_argument", "from_args", "params_schema", "parse_value"]

_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_SEQ = re.compile(r"[0-9]+")
_LONGEST = 200  # characters of a value shown in an error


def _shown(text: str) -> str:
    return text if len(text) <= _LONGEST else text[:_LONGEST] + "…"


def parse_value(text: str, ty: FieldType, name: str) -> int | float | bool:
    """The value of parameter ``name`` of type ``ty`` written as ``text``: an int (UINT, INT,
    the label's index for ENUM), a float (FLOAT32, already rounded to single precision) or a
    bool. A :class:`UsageError` saying what was expected otherwise."""
    where = f"--param {name}={_shown(text)}"
    if isinstance(ty, Ipv4Type | TimestampType):
        return _parse_address_or_time(text, ty, name, where)
    if isinstance(ty, UIntType | IntType):
        if not _INTEGER.fullmatch(text) or len(text) > 40:
            raise UsageError(f"{where}: :{name} is {ty}: give an integer")
        value = int(text)
        lo, hi = ty.range
        if not lo <= value <= hi:
            raise UsageError(f"{where}: {value} does not fit :{name}'s type {ty} ({lo}..{hi})")
        return value
    if isinstance(ty, Float32Type):
        if text.lower() in ("inf", "+inf", "-inf"):
            return float(text.lower())
        if not _NUMBER.fullmatch(text) or len(text) > 400:
            raise UsageError(f"{where}: :{name} is FLOAT32: give a decimal number (or inf, -inf)")
        number = float(decimal_to_float32(text))
        if not math.isfinite(number):
            raise UsageError(f"{where}: beyond the range of FLOAT32 (write inf for an infinity)")
        return number
    if isinstance(ty, BoolType):
        low = text.lower()
        if low not in ("true", "false"):
            raise UsageError(f"{where}: :{name} is BOOL: give true or false")
        return low == "true"
    if isinstance(ty, EnumType):
        if text not in ty.labels:
            close = [
                label for label in ty.labels if label.lower() == text.lower()
            ] or difflib.get_close_matches(text, ty.labels, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise UsageError(f"{where}: not a label of :{name}'s type {ty}{hint}")
        return ty.labels.index(text)
    raise TypeError(f"not a field type: {ty!r}")


def _parse_address_or_time(text: str, ty: Ipv4Type | TimestampType, name: str, where: str) -> int:
    """An IPV4 parameter's dotted quad, or a TIMESTAMP parameter's ISO 8601 time."""
    if isinstance(ty, Ipv4Type):
        address = parse_ipv4(text)
        if address is None:
            raise UsageError(f"{where}: :{name} is IPV4: give an address such as 10.1.2.3")
        return address
    try:
        return parse_timestamp(text, ty.unit)
    except ValueError as err:
        raise UsageError(f"{where}: :{name} is {ty}: the time {err}") from None


def _text(value, ty: FieldType) -> str | int | float | bool:
    """A value as the summary and the reports show it: the label for ENUM."""
    if isinstance(ty, Ipv4Type):
        return format_ipv4(value)
    if isinstance(ty, TimestampType):
        return format_timestamp(value, ty.unit)
    return ty.labels[value] if isinstance(ty, EnumType) else value


@dataclass(frozen=True)
class ParamValues:
    """The runtime parameters of a query file and their values over the stream.

    ``types``: each parameter's type, in order of first use (the program's). ``initial``: the
    values in force from tuple 0. ``switches``: ``(seq, values)`` in ascending ``seq`` (at
    least 1), each the new values of some parameters from tuple ``seq`` on.
    """

    types: dict[str, FieldType] = field(default_factory=dict)
    initial: dict[str, int | float | bool] = field(default_factory=dict)
    switches: tuple[tuple[int, dict[str, int | float | bool]], ...] = ()

    @classmethod
    def parse(
        cls,
        types: dict[str, FieldType],
        texts: list[str] | None,
        *,
        switches: bool = True,
        command: str = "this command",
    ) -> ParamValues:
        """From ``--param`` texts (``name=value``, and with ``switches`` ``name=value@seq``).
        Every parameter needs a value from tuple 0; an unknown name, a value that does not fit
        its type, a name given twice for one tuple: a :class:`UsageError`."""
        initial: dict[str, int | float | bool] = {}
        later: dict[int, dict[str, int | float | bool]] = {}
        for text in texts or ():
            name, sep, rest = text.partition("=")
            name = name.strip()
            if not sep or not name:
                raise UsageError(
                    f"--param {_shown(text)}: write name=value"
                    + (" or name=value@seq" if switches else "")
                )
            name = _param_name(name.removeprefix(":"), types)
            if name not in types:
                known = ", ".join(f":{n}" for n in types) or "none"
                close = difflib.get_close_matches(name, list(types), n=1)
                hint = f" (did you mean :{close[0]}?)" if close else ""
                raise UsageError(
                    f"--param {_shown(text)}: the queries have no parameter "
                    f":{_shown(name)}{hint}; they have {known}"
                )
            value_text, at, seq_text = rest.rpartition("@")
            seq = 0
            if at and _SEQ.fullmatch(seq_text) and len(seq_text) <= 20:
                if not switches:
                    raise UsageError(
                        f"--param {_shown(text)}: {command} takes the values the "
                        "engine starts with (name=value), not switches (@seq)"
                    )
                seq = int(seq_text)
            else:
                value_text = rest
            value = parse_value(value_text.strip(), types[name], name)
            target = initial if seq == 0 else later.setdefault(seq, {})
            if name in target:
                raise UsageError(f"--param {_shown(text)}: :{name} is given twice for tuple {seq}")
            target[name] = value
        missing = [n for n in types if n not in initial]
        if missing:
            raise UsageError(
                "the queries' parameters need values: "
                + ", ".join(f"--param {n}=…" for n in missing)
                + f" ({', '.join(f':{n} {types[n]}' for n in missing)})"
            )
        ordered = tuple(
            (s, {n: later[s][n] for n in types if n in later[s]}) for s in sorted(later)
        )
        return cls(dict(types), {n: initial[n] for n in types}, ordered)

    @classmethod
    def from_initial(cls, types: dict[str, FieldType], given: dict, *, source: str) -> ParamValues:
        """The values a file recorded (``as_dict()["initial"]``, e.g. a vectors manifest),
        checked as ``--param`` values are; a :class:`UsageError` naming ``source``."""
        texts = []
        for name, value in given.items():
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            texts.append(f"{name}={text}")
        try:
            return cls.parse(types, texts, switches=False)
        except UsageError as err:
            raise UsageError(f"{source}: runtime_parameters: {err}") from None

    def __bool__(self) -> bool:
        return bool(self.types)

    def in_force(self, seq: int) -> dict[str, int | float | bool]:
        """The values tuple ``seq`` is judged with."""
        values = dict(self.initial)
        for s, changes in self.switches:
            if s > seq:
                break
            values.update(changes)
        return values

    def columns(self, n: int, first: int = 0) -> dict[str, np.ndarray]:
        """The values as :func:`nfacep.lang.evaluate.evaluate` takes them, for the tuples
        ``first`` to ``first + n - 1``: one value (0-d) for a parameter that does not change
        there, else one per tuple."""
        import numpy as np

        from .io.tuples import column_dtype

        out = {}
        for name, ty in self.types.items():
            dtype = column_dtype(ty)
            value = self.initial[name]
            steps = [(s, c[name]) for s, c in self.switches if name in c]
            before = [v for s, v in steps if s <= first]
            if before:
                value = before[-1]
            inside = [(s - first, v) for s, v in steps if first < s < first + n]
            if not inside:
                out[column_of(name)] = np.asarray(value, dtype=dtype)
                continue
            col = np.full(n, value, dtype=dtype)
            for at, v in inside:
                col[at:] = v
            out[column_of(name)] = col
        return out

    def schema(self):
        """The parameters as the fields of a stream (:class:`nfacep.schema.Schema`), in order:
        their values travel in the tuple wire format (docs/formats.md), as the engine's
        parameter registers hold them."""
        return params_schema(self.types)

    def packed(self, values: dict[str, int | float | bool]) -> int:
        """``values`` (one for every parameter) packed as the engine's parameter registers
        hold them: :func:`nfacep.wire.pack` of one tuple of :meth:`schema`."""
        import numpy as np

        from . import wire
        from .io.tuples import Tuples, column_dtype

        columns = {n: np.array([values[n]], dtype=column_dtype(ty)) for n, ty in self.types.items()}
        return wire.pack(self.schema(), Tuples(columns, 1))[0]

    def width(self) -> int:
        """Bits of :meth:`packed` values (0 without parameters)."""
        from . import wire

        return wire.tuple_width(self.schema()) if self.types else 0

    def unpacked(self, packed: int) -> dict[str, int | float | bool]:
        """The inverse of :meth:`packed`: the values packed in ``packed`` (e.g. the values in
        force a board reports), as :meth:`parse` gives them; a ValueError when they do not
        fit."""
        from . import wire

        columns = wire.unpack(self.schema(), [packed]).columns
        return {n: _python(columns[n][0], ty) for n, ty in self.types.items()}

    def texts(self, values: dict[str, int | float | bool]) -> dict:
        """``values`` as :meth:`as_dict` shows them (ENUM values as labels)."""
        return {n: _text(v, self.types[n]) for n, v in values.items()}

    def as_dict(self) -> dict:
        """For summaries and reports: the values from tuple 0 and the switches (ENUM values as
        labels)."""
        return {
            "initial": {n: _text(v, self.types[n]) for n, v in self.initial.items()},
            "switches": [
                {"seq": s, "values": {n: _text(v, self.types[n]) for n, v in c.items()}}
                for s, c in self.switches
            ],
        }


def _param_name(name: str, types: dict[str, FieldType]) -> str:
    """The parameter ``--param name=…`` gives a value to, as the queries spell it: written
    ``"name"``, exactly that one; else the one of that name, or the one equal to it ignoring
    case (a file's parameters differ in more than case, so there is at most one)."""
    if len(name) > 1 and name[0] == name[-1] == '"':
        return name[1:-1]
    if name in types:
        return name
    return next((n for n in types if n.upper() == name.upper()), name)


def params_schema(types: dict[str, FieldType]):
    """Parameters of these types as the fields of a stream named ``parameters``."""
    from .lang.ast import FieldDecl
    from .schema import Schema

    return Schema("parameters", tuple(FieldDecl(n, ty) for n, ty in types.items()))


def _python(value, ty: FieldType) -> int | float | bool:
    """A numpy value of a column as :meth:`ParamValues.parse` gives values."""
    if isinstance(ty, Float32Type):
        return float(value)
    if isinstance(ty, BoolType):
        return bool(value)
    if isinstance(ty, EnumType) and isinstance(value, str):
        return ty.labels.index(value)
    return int(value)


def add_argument(parser: argparse.ArgumentParser, *, switches: bool) -> None:
    """``--param`` (repeatable) on a command that models or builds the engine."""
    parser.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE" + ("[@SEQ]" if switches else ""),
        help="the value of the queries' runtime parameter :NAME (repeat for each)"
        + ("; NAME=VALUE@SEQ changes it from tuple SEQ on" if switches else ""),
    )


def from_args(
    types: dict[str, FieldType], args: argparse.Namespace, *, switches: bool, command: str
) -> ParamValues:
    return ParamValues.parse(
        types, getattr(args, "param", None), switches=switches, command=command
    )
