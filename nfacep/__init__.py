"""nfacep: compile complex-event queries into FPGA gateware.

The compiler is a pipeline of small stages (README.md, 'Architecture for contributors')::

    text ─ syntax.parse ─▶ ast.File ─ check.check ─▶ check.Program ─ nfa.build ─▶ nfa.Nfa
                                                                        ├─ reference.run
                                                                        └─ hdl (gateware)

:func:`compile_text` and :func:`compile_file` run the first three stages.
"""

from __future__ import annotations

from .check import Program
from .errors import DataError, NfacepError, QueryError
from .nfa import Nfa

__all__ = [
    "DataError",
    "Nfa",
    "NfacepError",
    "Program",
    "QueryError",
    "compile_file",
    "compile_text",
]


def compile_text(text: str, filename: str = "<query>") -> Nfa:
    """Parse, check and wire a query file's text; raises :class:`QueryError`."""
    from . import check, nfa, syntax

    try:
        result = nfa.build(check.check(syntax.parse(text, filename)))
    except QueryError as err:
        raise err.located(text, filename) from None
    for warning in result.program.warnings:
        warning.located(text, filename)
    return result


def compile_file(path: str) -> Nfa:
    """Like :func:`compile_text`, reading the file (errors name it)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as err:
        raise NfacepError(f"{path}: cannot read the query file: {err}") from None
    return compile_text(text, path)
