"""User-facing errors: every one names a place (file, line, column) and renders with a caret."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "SHOWN_ERRORS",
    "DataError",
    "HardwareLimitError",
    "NfacepError",
    "QueryError",
    "QueryErrors",
    "SourcePos",
    "UsageError",
    "file_order",
]


@dataclass(frozen=True, slots=True)
class SourcePos:
    """A 1-based line and column in a query file."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.line}:{self.column}"


class NfacepError(Exception):
    """Base class of the errors a user can cause; the command line prints them and exits 2."""

    exit_code = 2

    def render(self) -> str:
        return str(self)


class UsageError(NfacepError):
    """A wrong command line argument or an unusable combination of parameters."""


class HardwareLimitError(UsageError):
    """A query or parameter beyond what one engine can hold (:mod:`nfacep.params`)."""


class QueryError(NfacepError):
    """A wrong query: rendered as ``file:line:col: message``, the offending line and a caret."""

    def __init__(
        self,
        message: str,
        pos: SourcePos | None,
        *,
        source: str | None = None,
        filename: str = "<query>",
        severity: str = "error",
    ):
        super().__init__(message)
        self.message = message
        self.pos = pos
        self.source = source
        self.filename = filename
        self.severity = severity

    @property
    def line(self) -> int | None:
        return self.pos.line if self.pos else None

    @property
    def column(self) -> int | None:
        return self.pos.column if self.pos else None

    @property
    def errors(self) -> tuple[QueryError, ...]:
        """Every error this one stands for, in file order: itself alone (see QueryErrors)."""
        return (self,)

    def located(self, source: str, filename: str) -> QueryError:
        """Attach the source text (for the caret line) if not already attached."""
        if self.source is None:
            self.source = source
            self.filename = filename
        return self

    def render(self) -> str:
        prefix = "" if self.severity == "error" else f"{self.severity}: "
        message = _printable(self.message)
        if len(message) > MESSAGE_WIDTH:  # a name or a type thousands of characters long
            message = message[: MESSAGE_WIDTH - 100] + " … " + message[-97:]
        if self.pos is None:
            return f"{self.filename}: {prefix}{message}"
        head = f"{self.filename}:{self.pos.line}:{self.pos.column}: {prefix}{message}"
        if self.source is None:
            return head
        lines = self.source.split("\n")  # as the lexer counts lines: \r, \f, … are no ends
        if not 1 <= self.pos.line <= len(lines) or not lines[self.pos.line - 1]:
            return head
        line = lines[self.pos.line - 1].removesuffix("\r")
        text, column = _excerpt(line, max(self.pos.column, 1))
        caret = " " * (column - 1) + "^"
        return f"{head}\n    {text}\n    {caret}"

    def __str__(self) -> str:
        return self.render()


#: Errors of one file shown in full; the others are counted on one line after them.
SHOWN_ERRORS = 20


def file_order(err: QueryError) -> tuple[bool, int, int]:
    """The sort key of errors and warnings in file order (one without a place last)."""
    return (err.pos is None, err.line or 0, err.column or 0)


class QueryErrors(QueryError):
    """Several errors of one query file, in file order. As a :class:`QueryError` it is the
    first of them (its message, place and severity), for callers that want one; it renders
    the first SHOWN_ERRORS of them, each with its place and caret, then how many more there
    are. Made by :meth:`of`, which returns a lone error as itself."""

    def __init__(self, errors: tuple[QueryError, ...]):
        first = errors[0]
        super().__init__(first.message, first.pos, source=first.source, filename=first.filename)
        self._errors = errors

    @staticmethod
    def of(errors: Iterable[QueryError]) -> QueryError:
        """The errors, those of each QueryErrors among them included, sorted by place (an
        error without a place last) and each once: one QueryError, or a QueryErrors."""
        unique: dict[tuple, QueryError] = {}
        for err in errors:
            for e in err.errors:
                unique.setdefault((e.pos, e.message, e.severity), e)
        found = tuple(sorted(unique.values(), key=file_order))
        if not found:
            raise ValueError("QueryErrors.of needs at least one error")
        return found[0] if len(found) == 1 else QueryErrors(found)

    @property
    def errors(self) -> tuple[QueryError, ...]:
        return self._errors

    def located(self, source: str, filename: str) -> QueryError:
        for err in self._errors:
            err.located(source, filename)
        super().located(source, filename)
        return self

    def render(self) -> str:
        shown = [err.render() for err in self._errors[:SHOWN_ERRORS]]
        more = len(self._errors) - SHOWN_ERRORS
        if more > 0:
            shown.append(
                f"{self.filename}: and {more} more error{'s' if more > 1 else ''} "
                f"(the first {SHOWN_ERRORS} are shown; check --json lists them all)"
            )
        return "\n".join(shown)


#: Widest source line shown under an error: a longer one is cut around the column.
EXCERPT_WIDTH = 100
#: Longest message shown: a longer one (it quotes a huge name or ENUM) is cut in the middle.
MESSAGE_WIDTH = 1000


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() else " " if ch == "\t" else "?" for ch in text)


def _excerpt(line: str, column: int) -> tuple[str, int]:
    """The part of ``line`` shown under a message and the caret's column in it: at most
    EXCERPT_WIDTH characters around ``column``, control characters shown as '?' so that
    nothing in a file can drive the terminal."""
    line = _printable(line)
    if len(line) <= EXCERPT_WIDTH:
        return line, column
    start = max(0, min(column - 1 - EXCERPT_WIDTH // 2, len(line) - EXCERPT_WIDTH))
    text = line[start : start + EXCERPT_WIDTH]
    if start > 0:
        text = "…" + text[1:]
    if start + EXCERPT_WIDTH < len(line):
        text = text[:-1] + "…"
    return text, column - start


class DataError(NfacepError):
    """A wrong tuple file: names the file, the row and the column."""
