"""Names in the checker: declarations (one name once, in any case), fields resolved from
columns, and the hints that name what an unknown name may have meant.

Names are compared as SQL compares them (:func:`nfacep.lang.ast.key`: an unquoted name stands for
its upper-case fold, a double-quoted one for itself); two declarations of one kind whose names
differ only in case are an error.
"""

from __future__ import annotations

from ..errors import QueryError, SourcePos
from ..schema import Schema
from . import ast
from .ast import FieldDecl
from .types import EnumType

__all__ = ["case_clash", "declare", "field_of", "shown", "suggest", "suggest_label"]


def declare(
    seen: dict, name: str, quoted: bool, pos: SourcePos | None, kind: str, twice: str
) -> None:
    """Record a declaration of a ``kind`` in ``seen`` (by upper-case fold): one whose name is an
    earlier one's (``twice`` says so) or differs from it only in case is an error naming both
    places."""
    earlier = seen.get(name.upper())
    if earlier is None:
        seen[name.upper()] = (name, quoted, pos)
        return
    other, other_quoted, other_pos = earlier
    if ast.key(name, quoted) != ast.key(other, other_quoted):
        raise case_clash(kind, ast.quote(name, quoted), earlier, pos)
    where = f" at {other_pos}" if other_pos else ""
    same = "" if (name, quoted) == (other, other_quoted) else "; unquoted names ignore case"
    raise QueryError(f"{twice} (first as {ast.quote(other, other_quoted)}{where}{same})", pos)


def case_clash(kind: str, written: str, earlier: tuple, pos: SourcePos | None) -> QueryError:
    other, other_quoted, other_pos = earlier
    where = f" at {other_pos}" if other_pos else ""
    prefix = ":" if kind == "parameter" else ""
    return QueryError(
        f"{kind} {written} differs only in case from {prefix}{ast.quote(other, other_quoted)}"
        f"{where}: two {kind} names must differ in more than case (a double-quoted name keeps "
        "its case, an unquoted one stands for its upper case)",
        pos,
    )


def field_of(col: ast.Column, schema: Schema, qualifier_ok: str | None = None) -> FieldDecl:
    """The field ``col`` names; ``qualifier_ok``: the key of the variable being defined."""
    if col.qualifier is not None and ast.key(col.qualifier, col.qualifier_quoted) != qualifier_ok:
        written = ast.quote(col.qualifier, col.qualifier_quoted) + "."
        written += ast.quote(col.name, col.quoted)
        if qualifier_ok is None:  # PARTITION BY, ORDER BY
            raise QueryError(
                f"'{written}': PARTITION BY and ORDER BY name fields of the stream, "
                f"unqualified: write {ast.quote(col.name, col.quoted)}",
                col.pos,
            )
        if col.qualifier.upper() == schema.name.upper():
            raise QueryError(
                f"'{written}' qualifies a field by its stream; a predicate names the current "
                f"tuple's fields unqualified ({ast.quote(col.name, col.quoted)}), or qualified "
                "by the variable being defined",
                col.pos,
            )
        raise QueryError(
            f"'{written}' refers to another variable's row; a predicate "
            "sees only the current tuple (qualify with the variable being defined, or not "
            "at all)",
            col.pos,
        )
    f = schema.resolve(col.name, col.quoted)
    if f is None:
        if col.qualifier is None and not col.quoted and col.name.upper() == "NULL":
            raise QueryError("NULL is not supported: a tuple's fields always hold a value", col.pos)
        raise QueryError(
            f"unknown field {shown(col.name, col.quoted)} in stream '{schema.name}'"
            + (_string_hint(col.name, schema) if col.quoted else "")
            + suggest(col.name, schema.fields),
            col.pos,
        )
    return f


def _string_hint(text: str, schema: Schema) -> str:
    """What to say of an unknown double-quoted name: double quotes quote names, as in SQL,
    so a string (an ENUM label) in double quotes is a name that is not a field."""
    labels = [
        f.name for f in schema.fields if isinstance(f.type, EnumType) and text in f.type.labels
    ]
    if labels:
        return (
            f": did you mean the label '{text}' of {labels[0]}? Double quotes quote names, "
            "as in SQL; ENUM labels take single quotes"
        )
    return ": double quotes quote names, as in SQL; a string takes single quotes"


def shown(name: str, quoted: bool) -> str:
    """A name in a message: ``'name'``, or ``"name"`` as written when it was quoted."""
    return ast.quote(name, True) if quoted else f"'{name}'"


def suggest_label(label: str, labels: tuple[str, ...]) -> str:
    """A hint naming the ENUM label ``label`` may have meant: labels are exact strings."""
    for c in labels:
        if c.lower() == label.lower():
            return f" (did you mean '{c}'? labels are case-sensitive)"
    import difflib

    close = difflib.get_close_matches(label, list(labels), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def suggest(name: str, choices) -> str:
    """A hint naming the declaration (an AST node with ``name`` and ``quoted``) that a
    reference ``name`` may have meant: one equal ignoring case (the quotes differ), else a
    close spelling."""
    written = {c.name: ast.quote(c.name, c.quoted) for c in choices}
    for c, text in written.items():
        if c.lower() == name.lower():
            return (
                f" (did you mean {text}? a double-quoted name keeps its case, an unquoted one "
                "stands for its upper case)"
            )
    import difflib

    close = difflib.get_close_matches(name.upper(), [c.upper() for c in written], n=1)
    if not close:
        return ""
    text = next(t for c, t in written.items() if c.upper() == close[0])
    return f" (did you mean {text}?)"
