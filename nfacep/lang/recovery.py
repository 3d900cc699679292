"""Going on after a syntax error: the parser is fed token by token (:class:`Recovery`), with
marks after each ';', after the AS of each DEFINE's definition and before each measure of
MEASURES to resume from, so that one run reports the errors of every statement (at most
MAX_ERRORS). A measure that does not parse is replaced by one the AST leaves out
(:data:`~nfacep.lang.ast.BROKEN_MEASURE`). An error after the ')' that
closes MATCH_RECOGNIZE (a WHERE or ORDER BY around it) ends its statement there: the query
before it is kept, and checked."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from typing import Any

import lark
from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput

from ..errors import QueryError
from ..limits import MAX_ERRORS, MAX_NESTING, MAX_TOKENS
from .ast import BROKEN_MEASURE
from .syntax_errors import CLAUSES, LANDMARKS, pos_of, syntax_error

# Bracket tokens counted by the nesting limit: '(' and '{-', ')' and '-}'.
_OPEN = {"LPAR", "__ANON_0"}
_CLOSE = {"RPAR", "__ANON_1"}

# What the recovery skips over as a whole, or counts: strings, quoted names, comments,
# parentheses, ',', ';', names, any other character.
_SCAN = re.compile(
    r"'(?:[^']|'')*'|\"[^\"\n]*\"|--[^\n]*|/\*.*?\*/|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|\S", re.S
)


@dataclasses.dataclass
class _Mark:
    """A parser state to go on from: just after a ';' (or at the start), or just after the AS
    of a definition in DEFINE (then ``start`` is where its condition begins)."""

    parser: Any
    lengths: list[int]
    depth: int
    statement: int
    start: int = 0
    as_token: Token | None = None
    #: where the last search for the next definition stopped: place, depth, last name's place
    scan: tuple[int, int, int] | None = None

    def restored(self):
        """A parser in the state of the mark, its stack's trees as they were then."""
        copied = self.parser.copy(deepcopy_values=False)
        stack = copied.parser_state.value_stack
        for i, n in enumerate(self.lengths):
            v = stack[i]
            if n >= 0:
                stack[i] = lark.Tree(v.data, v.children[:n], meta=v._meta)
        return copied


class Recovery:
    """Lex and parse, counting tokens and bracket depth on the lexer's tokens as they come,
    and going on after a syntax error from the last :class:`_Mark` that lies before it."""

    def __init__(self, parser: Lark, text: str):
        self.parser = parser  # the LALR parser of the grammar (nfacep.lang.syntax)
        self.text = text
        self.seen: list[Token] = []
        self.errors: list[QueryError] = []
        self.broken = False  # a CREATE STREAM did not parse
        self.depth = 0
        self.statement = 0  # ';' read so far
        self.statement_start = 0  # index in seen of the statement's first token
        self.in_define = False
        self.in_measures = False
        self.measures_depth = 0  # the depth MEASURES is at: its items' commas are there
        self.measures_end: Token | None = None  # the clause keyword that ended MEASURES
        #: the tokens of the statement so far that say where an error is (LANDMARKS, and the
        #: ')' that closes MATCH_RECOGNIZE), after the ';' before it: what the messages look
        #: at, kept as tokens come so that no message scans a long statement
        self.heads: list[Token] = []
        self.mr_depth: int | None = None  # the depth MATCH_RECOGNIZE's '(' opens from
        self.mr_closed = False  # the statement's MATCH_RECOGNIZE ( … ) has been read whole

    def run(self):
        """The parse tree of the statements that parsed (None when none could be kept), the
        errors, and whether a CREATE STREAM was among the statements that did not parse."""
        parser = self.parser.parse_interactive(self.text)
        self.between = _Mark(*_snapshot(parser), 0, 0)
        self.condition: _Mark | None = None
        self.measure: _Mark | None = None
        last = -1  # where the last error was: each recovery must get past it
        while True:
            try:
                self._feed(parser)
                return (
                    parser.feed_eof(self.seen[-1] if self.seen else None),
                    self.errors,
                    self.broken,
                )
            except UnexpectedInput as err:
                offset = _offset(err, self.text)
                if self.seen and self.seen[-1] is getattr(err, "token", None):
                    if self.heads and self.heads[-1] is self.seen[-1]:
                        self.heads.pop()
                    self.seen.pop()
                self.errors.append(syntax_error(err, self.text, self.seen, self.heads))
                if offset is None or offset <= last or len(self.errors) >= MAX_ERRORS:
                    return self._stop(offset), self.errors, self.broken
                last = offset
                resumed = self._resume(parser, err, offset)
                if resumed is None:
                    return self._stop(None), self.errors, self.broken
                parser = resumed
            except QueryError as err:  # a limit: the rest of the file is not read
                self.errors.append(err)
                return self._stop(None), self.errors, self.broken

    def _feed(self, parser) -> None:
        for token in parser.iter_parse():
            # the token before this one has been fed to the parser: mark after ';' and AS
            prev = self.seen[-1] if self.seen else None
            if prev is not None and prev.type == "SEMICOLON":
                self.statement += 1
                self.statement_start = len(self.seen)
                self.in_define = self.in_measures = False
                self.condition = self.measure = self.measures_end = None
                self.heads, self.mr_depth, self.mr_closed = [prev], None, False
                self.between = _Mark(*_snapshot(parser), self.depth, self.statement)
            elif (
                self.in_define
                and prev is not None
                and prev.type == "AS"
                and len(self.seen) >= 2
                and self.seen[-2].type == "NAME"
            ):
                self.condition = _Mark(
                    *_snapshot(parser),
                    self.depth,
                    self.statement,
                    start=prev.end_pos or 0,
                    as_token=prev,
                )
            elif (
                self.in_measures
                and prev is not None
                and prev.type in ("MEASURES", "COMMA")
                and self.depth == self.measures_depth
            ):  # before a measure
                self.measure = _Mark(
                    *_snapshot(parser),
                    self.depth,
                    self.statement,
                    start=prev.end_pos or 0,
                    as_token=prev,
                )
            if len(self.seen) >= MAX_TOKENS:
                raise QueryError(
                    f"the file has more than {MAX_TOKENS} tokens (names, numbers, "
                    "operators), more than nfacep accepts in one file",
                    pos_of(token),
                )
            self.seen.append(token)
            if token.type in CLAUSES:
                if self.in_measures:
                    self.measures_end = token
                self.in_define = token.type == "DEFINE"
                self.in_measures = token.type == "MEASURES"
                self.measures_depth = self.depth
            if token.type in LANDMARKS:
                self.heads.append(token)
                if token.type == "MATCH_RECOGNIZE":
                    self.mr_depth = self.depth
            if token.type in _OPEN:
                self.depth += 1
                if self.depth > MAX_NESTING:
                    raise QueryError(
                        f"nesting deeper than {MAX_NESTING} levels of parentheses", pos_of(token)
                    )
            elif token.type in _CLOSE:
                self.depth -= 1
                if self.depth == self.mr_depth:  # the ')' that closes MATCH_RECOGNIZE
                    self.heads.append(token)
                    self.mr_depth = None
                    # and its DEFINE: an error after it is not in a condition
                    self.mr_closed, self.in_define, self.condition = True, False, None

    def _resume(self, parser, err: UnexpectedInput, offset: int):
        """A parser to go on with after the error at ``offset`` (``parser`` met it): in the
        DEFINE condition the error is in, with TRUE for the condition, from the next
        definition (or the clause's end); after MATCH_RECOGNIZE ( … ) [AS name], with the
        statement ended there, from the next ';'; else from the next ';' with the statement
        dropped. None at the end of the file."""
        if self.mr_closed:
            ended = _ended(parser, self.text, offset, err)
            if ended is not None:
                return ended
        measure = self._measure_resumed(err, offset)
        if measure is not None:
            return measure
        mark = self.condition
        if mark is not None and mark.statement == self.statement and mark.start <= offset:
            assert mark.as_token is not None, "a condition's mark is just after its AS"
            parser = mark.restored()
            with contextlib.suppress(UnexpectedInput):  # then from the next ';'
                parser.feed_token(Token.new_borrow_pos("TRUE", "TRUE", mark.as_token))
                self.depth = mark.depth
                at = _next_definition(self.text, mark, offset)
                return _moved(parser, self.text, at, err, offset)
        first = self.seen[self.statement_start] if self.statement_start < len(self.seen) else None
        self.broken |= first is not None and first.type == "CREATE"
        semicolon = _next_semicolon(self.text, offset)
        if semicolon is None:
            return None
        # the ';' read next starts the next statement (_feed)
        self.depth = self.between.depth
        self.condition = None
        self.in_define = False
        parser = self.between.restored()
        return _moved(parser, self.text, semicolon, err, offset)

    def _measure_resumed(self, err: UnexpectedInput, offset: int):
        """After an error in a measure of MEASURES (or at the clause keyword that ends it): a
        parser with that measure read as :data:`BROKEN_MEASURE`, from the next one (or the
        next clause); None elsewhere, or when that does not parse either."""
        mark = self.measure
        inside = self.in_measures or (
            self.measures_end is not None and getattr(err, "token", None) is self.measures_end
        )
        if not inside or mark is None or mark.statement != self.statement or mark.start > offset:
            return None
        assert mark.as_token is not None, "a measure's mark is just after MEASURES or ','"
        parser = mark.restored()
        try:
            for kind, text in (("NAME", "x"), ("AS", "AS"), ("NAME", BROKEN_MEASURE)):
                parser.feed_token(Token.new_borrow_pos(kind, text, mark.as_token))
        except UnexpectedInput:
            return None
        self.depth = mark.depth
        self.in_measures, self.measures_end = True, None
        return _moved(parser, self.text, _next_measure(self.text, mark.start, offset), err, offset)

    def _stop(self, offset: int | None):
        """The tree of the statements before the last ';' read, the rest left unread."""
        if offset is not None and len(self.errors) >= MAX_ERRORS:
            self.errors.append(
                QueryError(
                    f"nfacep stopped reading the file here, after {MAX_ERRORS} errors",
                    self.errors[-1].pos,
                )
            )
        first = self.seen[self.statement_start] if self.statement_start < len(self.seen) else None
        self.broken |= first is not None and first.type == "CREATE"
        try:
            return self.between.restored().feed_eof(None)
        except UnexpectedInput:  # cannot happen: between statements, the file may end
            return None


def _snapshot(parser) -> tuple[Any, list[int]]:
    """A copy of an interactive parser to go on from later, and the number of children of each
    tree on its stack. lark extends a tree's children in place (a repetition's list, as more
    items are reduced into it), so what the copy shares is cut back to these numbers when it
    is used (:meth:`_Mark.restored`): cheaper than the deep copy lark offers, which would copy
    every statement before at every mark."""
    copied = parser.copy(deepcopy_values=False)
    stack = copied.parser_state.value_stack
    return copied, [len(v.children) if isinstance(v, lark.Tree) else -1 for v in stack]


def _offset(err: UnexpectedInput, text: str) -> int | None:
    """Where in ``text`` an error is, or None at its end."""
    if isinstance(err, UnexpectedCharacters):
        return err.pos_in_stream
    token = getattr(err, "token", None)
    if token is None or token.type == "$END" or token.start_pos is None:
        return None
    return token.start_pos


def _next_definition(text: str, mark: _Mark, offset: int) -> int:
    """Where to go on after an error at ``offset`` in the condition that starts at
    ``mark.start``: its next definition (a ',' or ``name AS`` outside parentheses), or the end
    of the clause (a ';', the ')' that closes MATCH_RECOGNIZE, the end of the file). The scan
    goes on from where the last one for this condition stopped (``mark.scan``)."""
    at, depth, word = mark.scan or (mark.start, 0, -1)  # word: where the last name starts
    for m in _SCAN.finditer(text, at):
        at, found = m.start(), m.group()
        mark.scan = (at, depth, word)
        depth += (found == "(") - (found == ")")
        if at >= offset and (depth < 0 or found == ";" or (depth == 0 and found == ",")):
            return at
        if at >= offset and depth == 0 and found.upper() == "AS" and word > mark.start:
            return word
        word = at if m.group("word") else -1
    return len(text)


#: The clause keywords that may follow MEASURES, where its last measure ends.
_AFTER_MEASURES = {"ONE", "ALL", "AFTER", "PATTERN"}


def _next_measure(text: str, start: int, offset: int) -> int:
    """Where to go on after an error at ``offset`` in the measure that starts at ``start``:
    the ',' before the next measure, or what ends the clause (a clause keyword, a ';', the
    ')' that closes MATCH_RECOGNIZE, the end of the file), outside parentheses."""
    depth = 0
    for m in _SCAN.finditer(text, start):
        at, found = m.start(), m.group()
        depth += (found == "(") - (found == ")")
        if at < offset:
            continue
        if depth < 0 or found == ";" or (depth == 0 and found == ","):
            return at
        if depth == 0 and m.group("word") and found.upper() in _AFTER_MEASURES:
            return at
    return len(text)


def _ended(parser, text: str, offset: int, err: UnexpectedInput):
    """``parser`` (which met the error at ``offset``) with its statement ended where it is,
    its lexer moved to the next ';' (or the end of the file); None when the statement cannot
    end there."""
    semicolon = _next_semicolon(text, offset)
    # (accepts() feeds copies without building trees: the trees on the stack are shared)
    if ("SEMICOLON" if semicolon is not None else "$END") not in parser.accepts():
        return None
    return _moved(parser, text, len(text) if semicolon is None else semicolon, err, offset)


def _next_semicolon(text: str, offset: int) -> int | None:
    """The next ';' at or after ``offset`` outside strings and comments, or None."""
    for m in _SCAN.finditer(text, offset):
        if m.group() == ";":
            return m.start()
    return None


def _moved(parser, text: str, at: int, err: UnexpectedInput, offset: int):
    """``parser`` with its lexer moved to ``at`` in ``text`` (counting lines from the error at
    ``offset``, whose line is known)."""
    line = getattr(err, "line", None) or 1
    line += text.count("\n", offset, at)
    counter = parser.lexer_thread.state.line_ctr
    counter.char_pos = at
    counter.line = line
    counter.line_start_pos = text.rfind("\n", 0, at) + 1
    counter.column = at - counter.line_start_pos + 1
    return parser
