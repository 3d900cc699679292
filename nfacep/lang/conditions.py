"""The checker's type rules: a DEFINE's condition typed into a :mod:`nfacep.lang.predicates`
expression (comparisons, arithmetic, PREV, parameters, literals of every field type), rejecting
with the reason what the per-tuple hardware cannot evaluate."""

from __future__ import annotations

import math
import operator
import re

from ..errors import QueryError, SourcePos
from ..limits import MAX_PREV
from ..schema import Schema
from . import ast
from . import predicates as P
from .names import case_clash, field_of, suggest_label
from .types import BoolType, FieldType, TimestampType
from .unsupported import call_error
from .values import decimal_to_float32, parse_network, parse_timestamp

__all__ = ["Conditions"]


class Conditions:
    """Types the conditions of one file's DEFINEs (a parameter has one type in the whole file);
    warnings (a constant FLOAT32 rounds to an infinity or to 0) go to ``warnings``."""

    def __init__(self, warnings: list[QueryError]):
        self.warnings = warnings
        #: each parameter (by key) with its type, the field that gave it and its first spelling
        self.params: dict[str, tuple[FieldType, str, str]] = {}
        #: each parameter's name folded to upper case, with its first use: for case-only clashes
        self.param_folds: dict[str, tuple[str, bool, SourcePos | None]] = {}

    def condition(self, e: ast.Expr, schema: Schema, var: str) -> P.PExpr:
        """``e`` typed as a condition of the variable ``var`` (by key) over ``schema``."""
        match e:
            case ast.BoolLit(value):
                return P.Const(value, "bool")
            case ast.Logical(op, items):
                parts = tuple(self.condition(i, schema, var) for i in items)
                return P.And(parts) if op == "AND" else P.Or(parts)
            case ast.Not(operand):
                return P.Not(self.condition(operand, schema, var))
            case ast.Compare():
                return self._compare(e, schema, var)
            case ast.Between(operand, low, high, negated):
                both = P.And(
                    (
                        self._compare(ast.Compare(">=", operand, low, pos=e.pos), schema, var),
                        self._compare(ast.Compare("<=", operand, high, pos=e.pos), schema, var),
                    )
                )
                return P.Not(both) if negated else both
            case ast.InList(operand, items, negated):
                anyof = P.Or(
                    tuple(
                        self._compare(
                            ast.Compare("=", operand, i, pos=i.pos), schema, var, member=True
                        )
                        for i in items
                    )
                )
                return P.Not(anyof) if negated else anyof
            case ast.Column():
                f = field_of(e, schema, var)
                if isinstance(f.type, BoolType):
                    return P.FieldRef(f.name, f.type)
                raise QueryError(
                    f"field '{f.name}' is {f.type}, not a condition: compare it with something",
                    e.pos,
                )
            case ast.Call("PREV"):
                prev = self._prev(e, schema, var)
                if isinstance(prev.type, BoolType):
                    return prev
                raise QueryError(
                    f"{P.render(prev)} is {prev.type}, not a condition: compare it with something",
                    e.pos,
                )
            case ast.Call():
                raise _reject_call(e)
        raise QueryError("expected a condition (a comparison, AND, OR, NOT, a BOOL field)", e.pos)

    def _operand(self, e: ast.Expr, schema: Schema, var: str):
        """Type an operand: returns (kind, PExpr | ast literal awaiting context)."""
        match e:
            case ast.Column():
                f = field_of(e, schema, var)
                kind = P.field_kind(f.type)
                return kind, P.FieldRef(f.name, f.type)
            case ast.IntLit(value):
                return "intlit", P.Const(value, "int")
            case ast.DecLit():
                return "declit", e
            case ast.StrLit():
                return "strlit", e
            case ast.TimestampLit():
                return "tslit", e
            case ast.BoolLit(value):
                return "bool", P.Const(value, "bool")
            case ast.ParamRef():
                return "param", e
            case ast.Neg(operand):
                return self._negated(e, operand, schema, var)
            case ast.BinOp():
                return self._arith(e, schema, var)
            case ast.Call("PREV"):
                prev = self._prev(e, schema, var)
                return P.field_kind(prev.type), prev
            case ast.Call():
                raise _reject_call(e)
            case _:
                return "bool", self.condition(e, schema, var)

    def _prev(self, call: ast.Call, schema: Schema, var: str) -> P.Prev:
        """Type ``PREV(field)`` or ``PREV(field, k)``: a field of the current stream, qualified
        with the variable being defined or not at all, ``k`` an integer constant 1 … MAX_PREV."""
        usage = f"write PREV(field) or PREV(field, k), k an integer from 1 to {MAX_PREV}"
        if not 1 <= len(call.args) <= 2:
            raise QueryError(
                f"PREV takes a field and how many tuples back, not {len(call.args)} "
                f"arguments: {usage}",
                call.pos,
            )
        col = call.args[0]
        if not isinstance(col, ast.Column) or col.name == "*":
            raise QueryError(
                f"PREV reads a field of an earlier tuple, not an expression: {usage} "
                "(PREV(a) + 1 for PREV(a + 1))",
                getattr(col, "pos", None) or call.pos,
            )
        if col.qualifier is not None and ast.key(col.qualifier, col.qualifier_quoted) != var:
            written = ast.quote(col.qualifier, col.qualifier_quoted)
            raise QueryError(
                f"PREV({written}.{ast.quote(col.name, col.quoted)}) reads the row before "
                f"the last one mapped to {written}, which the NFA does not keep: PREV reads "
                "the previous tuples of the partition, qualified with the variable being "
                "defined or not at all",
                col.pos,
            )
        f = field_of(col, schema, var)
        k = 1
        if len(call.args) == 2:
            arg = call.args[1]
            if not isinstance(arg, ast.IntLit) or not 1 <= arg.value <= MAX_PREV:
                raise QueryError(
                    f"PREV's second argument counts tuples back and must be an integer "
                    f"constant from 1 to {MAX_PREV}: the partition's entry keeps at most "
                    f"{MAX_PREV} earlier values of a field",
                    getattr(arg, "pos", None) or call.pos,
                )
            k = arg.value
        return P.Prev(f.name, f.type, k)

    def _negated(self, e: ast.Neg, operand: ast.Expr, schema: Schema, var: str):
        """Type a unary minus: literals fold, an integer field becomes ``neg``."""
        kind, inner = self._operand(operand, schema, var)
        if kind == "param":
            raise _param_alone(inner)
        if kind == "intlit":
            return "intlit", P.Const(-inner.value, "int")
        if kind == "declit":
            text = inner.text[1:] if inner.text.startswith("-") else "-" + inner.text
            return "declit", ast.DecLit(text, pos=e.pos)
        if kind != "int":
            raise QueryError(f"unary minus needs an integer operand, not {kind}", e.pos)
        return "int", P.Arith("neg", inner)

    def _arith(self, e: ast.BinOp, schema: Schema, var: str):
        """Type ``+``/``-``/``*``: integers only, ``*`` by an integer constant; literals fold."""
        op, left, right = e.op, e.left, e.right
        if op not in ("+", "-", "*"):
            raise QueryError(
                f"'{op}' is not supported: integer division and remainder are not exact; "
                "conditions use +, - and * by an integer constant (write x / 3 > y as "
                "x > y * 3 + 2)",
                e.pos,
            )
        lk, lv = self._operand(left, schema, var)
        rk, rv = self._operand(right, schema, var)
        for k, side in ((lk, left), (rk, right)):
            if k == "param" and op == "*":
                raise QueryError(
                    f"parameter :{(lv if side is left else rv).name} cannot be a factor: '*' "
                    "multiplies by a constant the gateware builds into its logic, and a "
                    "parameter, which may change while the engine runs, would need a "
                    "multiplier; compare the field with the parameter instead",
                    side.pos,
                )
            if k == "param":
                raise _param_alone(lv if side is left else rv)
            if k not in ("int", "intlit"):
                raise QueryError(
                    f"'{op}' works on integer fields and integer literals "
                    f"only, not on {_kind_text(k)}",
                    side.pos,
                )
        if lk == rk == "intlit":
            value = {"+": operator.add, "-": operator.sub, "*": operator.mul}[op](
                lv.value, rv.value
            )
            return "intlit", P.Const(value, "int")
        if op == "*":
            if lk == rk == "int":
                raise QueryError(
                    "'*' multiplies by an integer constant only: a product of two fields "
                    "needs a multiplier in the gateware (write the constant as a literal)",
                    e.pos,
                )
            if lk == "intlit":  # c * e is e * c: one decoder bit for both spellings
                lv, rv = rv, lv
        node = P.Arith(op, lv, rv)
        lo, hi = node.range
        if not -(1 << (P.WIDEST - 1)) <= min(lo, hi) <= max(lo, hi) < 1 << (P.WIDEST - 1):
            raise QueryError(
                f"'{P.render(node)}' ranges over {lo}..{hi}, beyond {P.WIDEST}-bit integers: "
                f"intermediate values must fit INT({P.WIDEST})",
                e.pos,
            )
        return "int", node

    def _compare(self, c: ast.Compare, schema: Schema, var: str, member: bool = False) -> P.PExpr:
        """A comparison; ``member``: an item of ``IN (…)``, where an IPv4 network may stand."""
        lk, lv = self._operand(c.left, schema, var)
        rk, rv = self._operand(c.right, schema, var)
        op = c.op
        # put a lone constant on the right, so `5 < x` and `x > 5` share a decoder bit
        constants = ("intlit", "declit", "strlit", "param", "tslit")
        if lk in constants and rk not in constants:
            lk, lv, rk, rv, _lside, rside = rk, rv, lk, lv, c.right, c.left
            op = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
        else:
            _lside, rside = c.left, c.right
        if rk == "param" or lk == "param":
            return self._param_compare(op, lk, lv, rk, rv, c)
        if "ipv4" in (lk, rk):
            return _ipv4_compare(op, lk, lv, rk, rv, c, rside, member)
        if rk == "tslit":
            rk, rv = "intlit", _timestamp_const(lk, lv, rv, c)
        kinds = {lk, rk}
        if kinds <= {"int", "intlit"}:
            _same_units(lv, rv, c)
            if lk == rk == "intlit":
                from .evaluate import evaluate  # numpy, only for a comparison of constants

                return P.Const(bool(evaluate(P.Cmp(op, lv, rv, "int"), {}, 1)[0]), "bool")
            self._fits(lv, rv, rside)
            return P.Cmp(op, lv, rv, "int")
        if lk == "float" and rk in ("float", "declit", "intlit"):
            if rk != "float":
                text = rv.text if rk == "declit" else str(rv.value)
                rv = P.Const(self._float32(text, rside), "float")
            return P.Cmp(op, lv, rv, "float")
        if lk == "enum" and (found := _enum_compare(op, lv, rk, rv, c, rside)) is not None:
            return found
        if lk == "bool" and rk == "bool":
            if op not in ("=", "<>"):
                raise QueryError("BOOL values can only be compared with = or <>", c.pos)
            return P.Cmp(op, lv, rv, "bool")
        raise QueryError(f"cannot compare {_kind_text(lk, lv)} with {_kind_text(rk, rv)}", c.pos)

    def _param_compare(self, op: str, lk: str, lv, rk: str, rv, c: ast.Compare) -> P.PExpr:
        """``field op :name``: the parameter takes the field's type; every comparison of the
        same name must agree on it."""
        if rk != "param" or not isinstance(lv, P.FieldRef | P.Prev):
            raise _param_alone(rv if rk == "param" else lv)
        ty = lv.type
        first = self.param_folds.setdefault(rv.name.upper(), (rv.name, rv.quoted, rv.pos))
        if ast.key(first[0], first[1]) != ast.key(rv.name, rv.quoted):
            raise case_clash("parameter", f":{ast.quote(rv.name, rv.quoted)}", first, rv.pos)
        earlier = self.params.setdefault(ast.key(rv.name, rv.quoted), (ty, lv.name, rv.name))
        if earlier[0] != ty:
            raise QueryError(
                f"parameter :{rv.name} is compared with {ty} field '{lv.name}' "
                f"here, but with {earlier[0]} field '{earlier[1]}' before: a "
                "parameter has one type, that of the fields it is compared with",
                rv.pos,
            )
        kind = P.field_kind(ty)
        if kind in ("enum", "bool", "ipv4") and op not in ("=", "<>"):
            raise QueryError(f"{ty} field '{lv.name}' can only be compared with = or <>", c.pos)
        return P.Cmp(op, lv, P.Param(earlier[2], ty), kind)

    def _float32(self, text: str, where: ast.Expr) -> float:
        """A constant rounded to FLOAT32, with a warning when it is out of FLOAT32's range:
        rounded to an infinity, or a non-zero constant to zero."""
        value = float(decimal_to_float32(text))
        mantissa = re.split("[eE]", text)[0]
        if math.isinf(value):
            self.warnings.append(
                QueryError(
                    f"{_short(text)} is beyond the range of FLOAT32 (its largest finite value is "
                    f"{_FLT_MAX}) and is rounded to {'-' if value < 0 else ''}inf",
                    where.pos,
                    severity="warning",
                )
            )
        elif value == 0 and re.search("[1-9]", mantissa):
            self.warnings.append(
                QueryError(
                    f"{_short(text)} is closer to 0 than the smallest FLOAT32 ({_FLT_TINY}) and is "
                    "rounded to 0",
                    where.pos,
                    severity="warning",
                )
            )
        return value

    def _fits(self, left: P.PExpr, right: P.PExpr, rside: ast.Expr) -> None:
        if isinstance(left, P.FieldRef | P.Prev) and isinstance(right, P.Const):
            lo, hi = left.range
            if not lo <= right.value <= hi:
                shown = f"field '{left.name}'" if isinstance(left, P.FieldRef) else P.render(left)
                raise QueryError(
                    f"constant {right.value} does not fit {shown} {left.type} ({lo}..{hi})",
                    rside.pos,
                )


_FLT_MAX = "3.4028235e+38"
_FLT_TINY = "1e-45"


def _short(text: str) -> str:
    return text if len(text) <= 30 else f"{text[:12]}…{text[-8:]} ({len(text)} characters)"


def _param_alone(p: ast.ParamRef) -> QueryError:
    return QueryError(
        f"parameter :{p.name} must be compared directly with a field (as in "
        f"'temp > :{p.name}'): it takes that field's type",
        p.pos,
    )


def _kind_text(kind: str, value=None) -> str:
    if isinstance(value, P.FieldRef):
        return f"{value.type} field '{value.name}'"
    if isinstance(value, P.Prev):
        return f"{value.type} {P.render(value)}"
    return {
        "intlit": "an integer literal",
        "declit": "a decimal literal",
        "strlit": "a string literal",
        "bool": "a Boolean",
        "int": "an integer expression",
        "float": "a FLOAT32 value",
        "enum": "an ENUM value",
        "ipv4": "an IPV4 value",
        "tslit": "a TIMESTAMP literal",
    }.get(kind, kind)


def _enum_compare(op: str, lv, rk: str, rv, c: ast.Compare, rside) -> P.PExpr | None:
    """An ENUM field compared with a label or a field of its type (None: with neither)."""
    if op not in ("=", "<>"):
        raise QueryError(
            f"ENUM field '{lv.name}' can only be compared with = or <> (labels have no order)",
            c.pos,
        )
    enum = lv.type
    if rk == "strlit":
        if rv.value not in enum.labels:
            raise QueryError(
                f"'{rv.value}' is not a label of field '{lv.name}' "
                f"{enum}" + suggest_label(rv.value, enum.labels),
                rside.pos,
            )
        return P.Cmp(op, lv, P.Const(enum.labels.index(rv.value), "enum", enum), "enum")
    if rk == "enum" and rv.type == enum:
        return P.Cmp(op, lv, rv, "enum")
    return None


def _ipv4_compare(op: str, lk: str, lv, rk: str, rv, c: ast.Compare, rside, member: bool):
    """An IPV4 field compared with another, with an address, or (in ``IN``) a network."""
    if op not in ("=", "<>", "!="):
        raise QueryError(
            "IPV4 addresses compare only with = and <>, and with a network by IN "
            "'a.b.c.d/n': they have no order here",
            c.pos,
        )
    if lk == rk == "ipv4":
        return P.Cmp(op, lv, rv, "ipv4")
    if lk == "ipv4" and rk == "strlit":
        try:
            value, prefix = parse_network(rv.value)
        except ValueError as err:
            raise QueryError(f"'{_short(rv.value)}' {err}", rside.pos) from None
        if prefix < 32 and not member:
            raise QueryError(
                f"'{rv.value}' is a network: test whether an address is in it with "
                f"{lv.name} IN '{rv.value}'",
                rside.pos,
            )
        return P.Cmp(op, lv, P.Const(value, "ipv4", prefix=prefix), "ipv4")
    raise QueryError(f"cannot compare {_kind_text(lk, lv)} with {_kind_text(rk, rv)}", c.pos)


def _units(e) -> set[str]:
    """The units of the TIMESTAMP fields an integer expression reads (as they are, or earlier
    tuples' through PREV)."""
    return {
        n.type.unit
        for n in P.nodes(e)
        if isinstance(n, P.FieldRef | P.Prev) and isinstance(n.type, TimestampType)
    }


def _timestamp_const(lk: str, lv, lit: ast.TimestampLit, c: ast.Compare) -> P.Const:
    """A TIMESTAMP literal as a count of the unit of the TIMESTAMP fields it is compared with."""
    units = _units(lv) if lk == "int" else set()
    if len(units) != 1:
        raise QueryError(
            f"TIMESTAMP '{_short(lit.text)}' must be compared with a TIMESTAMP field (or an "
            "expression over TIMESTAMP fields of one unit), which gives its unit",
            lit.pos,
        )
    (unit,) = units
    try:
        return P.Const(parse_timestamp(lit.text, unit), "int", unit=unit)
    except ValueError as err:
        raise QueryError(f"TIMESTAMP '{_short(lit.text)}' {err}", lit.pos) from None


def _same_units(left, right, c: ast.Compare) -> None:
    """Two TIMESTAMP fields of different units compared as they are would compare counts of
    different units: an error that says how to convert."""
    if isinstance(left, P.FieldRef | P.Prev) and isinstance(right, P.FieldRef | P.Prev):
        units = _units(left) | _units(right)
        if len(units) > 1:
            raise QueryError(
                f"'{left.name}' is {left.type} and '{right.name}' is {right.type}: their "
                "counts are in different units; convert one with * (as ms_field > s_field * "
                "1000)",
                c.pos,
            )


def _reject_call(call: ast.Call) -> QueryError:
    return call_error(call.name, call.pos)
