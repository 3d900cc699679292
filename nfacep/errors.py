"""User-facing errors: every one names a place (file, line, column) and renders with a caret."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DataError", "HardwareLimitError", "NfacepError", "QueryError", "SourcePos",
           "UsageError"]


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

    def __init__(self, message: str, pos: SourcePos | None, *, source: str | None = None,
                 filename: str = "<query>", severity: str = "error"):
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

    def located(self, source: str, filename: str) -> QueryError:
        """Attach the source text (for the caret line) if not already attached."""
        if self.source is None:
            self.source = source
            self.filename = filename
        return self

    def render(self) -> str:
        prefix = "" if self.severity == "error" else f"{self.severity}: "
        if self.pos is None:
            return f"{self.filename}: {prefix}{self.message}"
        head = f"{self.filename}:{self.pos.line}:{self.pos.column}: {prefix}{self.message}"
        if self.source is None:
            return head
        lines = self.source.splitlines()
        if not 1 <= self.pos.line <= len(lines):
            return head
        text = lines[self.pos.line - 1].expandtabs(1)
        caret = " " * (max(self.pos.column, 1) - 1) + "^"
        return f"{head}\n    {text}\n    {caret}"

    def __str__(self) -> str:
        return self.render()


class DataError(NfacepError):
    """A wrong tuple file: names the file, the row and the column."""
