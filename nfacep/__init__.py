"""nfacep: compile complex-event queries into FPGA gateware.

The compiler is a pipeline of small stages (README.md, 'Architecture for contributors')::

    text ─ lang.syntax.parse ─▶ lang.ast.File ─ lang.check.check ─▶ schema.Program
         ─ nfa.build ─▶ nfa.Nfa ─┬─ reference (the software engine: matcher, dfa, capacity)
                                 └─ hdl (gateware), sim, boards
    tuples ─ io ─▶ io.tuples.Tuples (CSV, Parquet) ─▶ the engines

The folders are the stages: ``lang/`` (the front end, the only user of lark), ``schema.py``
and ``limits.py`` (the vocabulary every stage shares), ``nfa.py``, ``reference/`` and ``io/``.

:func:`compile_text` and :func:`compile_file` run the first three stages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import DataError, NfacepError, QueryError, QueryErrors
from .lazy import lazy_attributes
from .limits import MAX_FILE_BYTES

if TYPE_CHECKING:
    from .nfa import Nfa
    from .schema import Program

__all__ = [
    "DataError",
    "Nfa",
    "NfacepError",
    "Program",
    "QueryError",
    "QueryErrors",
    "compile_file",
    "compile_text",
]


def compile_text(text: str, filename: str = "<query>") -> Nfa:
    """Parse, check and wire a query file's text; raises :class:`QueryError`, a
    :class:`QueryErrors` when the file has several errors: the syntax errors (parsing goes on
    after each) and the errors of checking what parsed, in file order. The queries of a file
    whose CREATE STREAM did not parse are not checked (their errors would only echo it)."""
    from . import nfa
    from .lang import check, syntax

    text = syntax.strip_bom(text)
    parsed = syntax.parse_all(text, filename)
    errors = list(parsed.errors)
    result = None
    try:
        if not errors or (parsed.streams_whole and parsed.file.queries):
            program = check.check(parsed.file)
            if not errors:
                result = nfa.build(program)
    except QueryError as err:
        errors.append(err)
    if errors or result is None:
        raise QueryErrors.of(errors).located(text, filename)
    for warning in result.program.warnings:
        warning.located(text, filename)
    return result


def compile_file(path: str) -> Nfa:
    """Like :func:`compile_text`, reading the file (errors name it)."""
    return compile_text(read_query_file(path), path)


def read_query_file(path: str) -> str:
    """The text of a UTF-8 query file; a file that is not, or is too large, is a
    :class:`QueryError` at the line and column of the first offending byte."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise NfacepError(f"{path}: cannot read the query file: {err.strerror or err}") from None
    if len(data) > MAX_FILE_BYTES:
        raise _byte_error(
            data,
            MAX_FILE_BYTES,
            path,
            f"the query file is larger than {MAX_FILE_BYTES} bytes, more than nfacep reads",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _byte_error(
            data,
            err.start,
            path,
            f"the file is not UTF-8 text: byte 0x{data[err.start]:02x} at offset "
            f"{err.start} {err.reason}; save the query file as UTF-8",
        ) from None


def _byte_error(data: bytes, offset: int, path: str, message: str) -> QueryError:
    from .errors import SourcePos

    line_start = data.rfind(b"\n", 0, offset) + 1
    line = data.count(b"\n", 0, offset) + 1
    column = len(data[line_start:offset].decode("utf-8", errors="replace")) + 1
    source = data[: offset + 200].decode("utf-8", errors="replace")
    return QueryError(message, SourcePos(line, column), source=source, filename=path)


# the compiler's modules (and lark) load on first use, so that importing the package (as the
# command's entry point does first) is quick
__getattr__, __dir__ = lazy_attributes(__name__, {"Nfa": "nfa", "Program": "schema"})
