"""Parsing: query text to :class:`nfacep.lang.ast.File`.

The parser's tables are loaded here (:func:`open_grammar`, from ``grammar.lark``); lark's tree of
each statement becomes AST nodes in :mod:`~nfacep.lang.transform`, parsing goes on after an error
in :mod:`~nfacep.lang.recovery`, and :mod:`~nfacep.lang.syntax_errors` words the errors. These four
modules are the only ones that import lark.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import os
import pathlib
import sys
import tempfile

import lark
from lark import Lark
from lark.exceptions import VisitError

from ..errors import QueryError, QueryErrors
from ..limits import MAX_NESTING
from . import ast
from .recovery import Recovery
from .syntax_errors import end_of
from .transform import ToAst

__all__ = ["Parsed", "parse", "parse_all"]


def open_grammar(grammar: pathlib.Path, cache: pathlib.Path | None, **options) -> Lark:
    """The LALR parser of the grammar file, loaded from ``cache`` when that holds the tables of
    this very grammar (its bytes, the options, lark's and Python's versions: a key written in
    the file and in its name), else built and saved there for the next process.

    A cache that is missing, stale, damaged or unwritable (a read-only install) only costs the
    build (tenths of a second); it is replaced whole (a temporary file renamed over it), so a
    concurrent process never reads half of one. ``cache=None`` builds without one.
    """
    text = grammar.read_text(encoding="utf-8")
    key = hashlib.sha256(
        "\0".join([text, repr(sorted(options.items())), lark.__version__, sys.version]).encode()
    ).hexdigest()
    if cache is not None:
        cache = cache.with_name(f"{cache.name}.{key[:16]}")
        # anything but this grammar's tables (no file, another key, a damaged one): build
        with contextlib.suppress(Exception), open(cache, "rb") as f:
            if f.readline() == f"{key}\n".encode():
                return Lark.load(f)
    parser = Lark(text, parser="lalr", **options)
    if cache is not None:
        with contextlib.suppress(OSError):
            cache.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("wb", dir=cache.parent, delete=False) as f:
                try:
                    f.write(f"{key}\n".encode())
                    parser.save(f)
                    f.close()
                    os.replace(f.name, cache)
                except BaseException:
                    os.unlink(f.name)
                    raise
    return parser


_GRAMMAR = pathlib.Path(__file__).with_name("grammar.lark")
#: Beside the module's bytecode, as Python keeps it (``__pycache__``, or PYTHONPYCACHEPREFIX).
_CACHE = pathlib.Path(importlib.util.cache_from_source(str(_GRAMMAR))).with_name("grammar.lalr")
_parser = open_grammar(_GRAMMAR, _CACHE, propagate_positions=True, maybe_placeholders=True)


@dataclasses.dataclass(frozen=True)
class Parsed:
    """What :func:`parse_all` makes of a file: the statements that parsed, and the errors of
    the others, in file order."""

    file: ast.File
    errors: tuple[QueryError, ...]
    #: whether every CREATE STREAM parsed: else checking the queries would only echo the broken
    #: declaration (unknown fields, an unknown stream)
    streams_whole: bool


def parse(text: str, filename: str = "<query>") -> ast.File:
    """Parse a query file; raises :class:`QueryError` (a :class:`QueryErrors` when there are
    several) with the place of each error, in file order.

    A byte-order mark at the start is skipped, as spreadsheets and some editors write one.
    """
    parsed = parse_all(text, filename)
    if parsed.errors:
        raise QueryErrors.of(parsed.errors) from None
    return parsed.file


def parse_all(text: str, filename: str = "<query>") -> Parsed:
    """Parse a query file, going on after an error: at the next definition of a DEFINE clause
    when the error is inside one of its conditions, else at the next ';'. Errors have their
    place and the text attached; at most MAX_ERRORS syntax errors are looked for."""
    text = strip_bom(text)
    tree, errors, broken = Recovery(_parser, text).run()
    streams: list[ast.CreateStream] = []
    queries: list[ast.Query] = []
    for statement in tree.children if tree is not None else ():
        transformer = ToAst()
        try:
            node = transformer.transform(statement)
            if isinstance(node, ast.Query):
                _check_depth(node)
        except QueryError as err:
            errors += [*transformer.errors, err]
            broken |= statement.data == "create_stream"
            continue
        except VisitError as err:  # lark wraps errors raised inside the transformer
            if not isinstance(err.orig_exc, QueryError):
                raise
            errors += [*transformer.errors, err.orig_exc]
            broken |= statement.data == "create_stream"
            continue
        errors += transformer.errors  # refused, but the statement was read past them
        (streams if isinstance(node, ast.CreateStream) else queries).append(node)
    file = ast.File(tuple(streams), tuple(queries), end=end_of(text))
    located = tuple(err.located(text, filename) for err in errors)
    return Parsed(file, located, not broken)


def strip_bom(text: str) -> str:
    """``text`` without a leading UTF-8 byte-order mark."""
    return text[1:] if text.startswith("\ufeff") else text


def _check_depth(query: ast.Query) -> None:
    """Reject a pattern or condition with more than MAX_NESTING operators inside each other."""
    roots: list[ast.Pattern | ast.Expr] = [query.pattern]
    roots.extend(d.expr for d in query.defines)
    for root in roots:
        stack = [(root, 0)]
        while stack:
            node, depth = stack.pop()
            kids = ast.children(node)
            if not kids:
                continue
            if depth == MAX_NESTING:
                raise QueryError(
                    f"nested deeper than {MAX_NESTING} levels: a pattern or condition may nest "
                    f"at most {MAX_NESTING} operators inside each other (a chain of n '+' or "
                    "'-' is n levels)",
                    node.pos,
                )
            stack.extend((k, depth + 1) for k in reversed(kids))
