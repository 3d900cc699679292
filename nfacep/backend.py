"""The back-end seam: every engine that matches tuples is a :class:`Backend`.

A back-end takes the wired queries (:class:`~nfacep.nfa.Nfa`), the tuples
(:class:`~nfacep.io.tuples.Tuples`) and the engine's :class:`~nfacep.params.EngineParams`, and
returns a :class:`~nfacep.result.Result`. The reference matcher
(:class:`nfacep.reference.matcher.Reference`), the simulated gateware
(:class:`nfacep.sim.Simulation`) and a board over its link
(:class:`nfacep.links.uart.host.UartBoard`, or :class:`nfacep.links.udp.host.UdpBoard` over UDP)
are siblings behind it, as regex-automata's engines are behind one NFA; a new engine (a compiled
simulator) implements :meth:`Backend.run` once and gets the match file, the summary, the report
and the command line's handling of them from :func:`run_files`.

A back-end that can also take the stream in pieces (:class:`Pieces`: the reference matcher)
gets it so from a file: :func:`run_files` reads :data:`~nfacep.limits.CHUNK` tuples at a time
(the first pieces smaller, :data:`~nfacep.limits.FIRST_PIECE` doubling up to it, so that
matching starts while the rest is read, and a CSV file's last pieces smaller again, so that
little is left to match once it is parsed: :func:`read_stream`), feeds each piece, told
whether it is the last, and writes its matches while the next is read, so that the memory a
run needs does not grow with the input. A back-end that reads the stream itself and may have
to start it again from its first tuple (:class:`Restarts`: a board over UDP, whose one safe
resend after a loss is the whole stream) gets a way to read the file in pieces, from its
start, as often as it needs, and a :class:`Sink` to open for each attempt: its matches go to a
temporary file beside the output, renamed over it only when the attempt completes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from .errors import UsageError
from .io import reader
from .io import tuples as tuples_mod
from .limits import CHUNK, FIRST_PIECE
from .nfa import Nfa
from .output import check_folder, check_outputs, is_folder, summary_path
from .params import EngineParams
from .result import MatchRows, Result, Totals, match_file, match_folder, write
from .settings import ParamValues

__all__ = [
    "Backend",
    "Feed",
    "Pieces",
    "Restarts",
    "Sink",
    "open_sink",
    "read_input",
    "read_pieces",
    "read_stream",
    "run_files",
]


class Backend(Protocol):
    """An engine: matches tuples as the engine with some parameters does."""

    def run(
        self,
        nfa: Nfa,
        tuples: tuples_mod.Tuples,
        params: EngineParams,
        values: ParamValues | None = None,
    ) -> Result:
        """Match every query of ``nfa`` over ``tuples``, with the runtime parameters'
        ``values`` (None when the queries have none). Raises
        :class:`~nfacep.errors.NfacepError` subclasses for what a user can fix or must know
        (a missing simulator, a board that does not answer); a result it must report but that
        is not right (a simulation that differs from the reference) is returned with
        :attr:`Result.failure` set, so the files are still written."""
        ...


class Feed(Protocol):
    """A stream being matched piece by piece (:meth:`Pieces.pieces`)."""

    def feed(self, tuples: tuples_mod.Tuples, *, last: bool = False) -> Result:
        """The matches and drops of the next piece (its ``n`` tuples; ``seqs`` and ``drops``
        are positions in the stream); ``last``: no piece follows."""
        ...


@runtime_checkable
class Pieces(Backend, Protocol):
    """A back-end that also matches a stream in pieces, carrying the engine's state from one
    to the next: the same result as :meth:`Backend.run` over the whole stream."""

    def pieces(self, nfa: Nfa, params: EngineParams, values: ParamValues | None = None) -> Feed: ...


class Sink:
    """Where a stream matched in pieces goes, a piece at a time (:func:`open_sink`): each
    piece's result counted in :attr:`totals` and its matches written to the match file, if
    there is one; :meth:`finish` after the last piece."""

    def __init__(
        self,
        totals: Totals,
        rows: MatchRows | None,
        *,
        query_file: str | None = None,
        input: str | None = None,
    ):
        self.totals = totals
        self.rows = rows
        self.query_file, self.input = query_file, input

    def add(self, result: Result, tuples: tuples_mod.Tuples) -> None:
        """The result of the next piece, ``tuples`` (the measures are read from them)."""
        if result.failure is not None:
            raise result.failure
        if self.rows is not None:
            self.rows.write(result, tuples)
        self.totals.add(result)

    def finish(self) -> Totals:
        """The stream is complete: the summary goes beside the rows (written when the sink's
        block ends)."""
        if self.rows is not None:
            self.rows.finish(self.totals.summary(query_file=self.query_file, input=self.input))
        return self.totals


@contextlib.contextmanager
def open_sink(
    output: str | None,
    nfa: Nfa,
    params: EngineParams,
    values: ParamValues | None = None,
    *,
    query_file: str | None = None,
    input: str | None = None,
    folder: bool = False,
) -> Iterator[Sink]:
    """A :class:`Sink` writing the match file ``output`` (a Parquet folder when ``folder``;
    nothing when None) and its summary: both appear when the block ends after
    :meth:`Sink.finish`, or neither does (an error in the block removes what was written)."""
    totals = Totals(tuple(q.name for q in nfa.queries), params, values)
    with contextlib.ExitStack() as stack:
        rows = None
        if output is not None:
            opener = match_folder if folder else match_file
            rows = stack.enter_context(opener(output, nfa.program))
        yield Sink(totals, rows, query_file=query_file, input=input)


@runtime_checkable
class Restarts(Backend, Protocol):
    """A back-end that reads the stream itself, piece by piece, and may start it again from
    its first tuple (a board over UDP: the one safe resend after a loss is the whole stream;
    a board over its UART reads it once).
    It holds a bounded part of the stream, not the whole of it: a few pieces of the tuples
    its ``chunk`` attribute says, when it has one (:func:`run_files` reads such pieces)."""

    def run_stream(
        self,
        nfa: Nfa,
        pieces: Callable[[], Iterator[tuples_mod.Tuples]],
        sink: Callable[[], AbstractContextManager[Sink]],
        params: EngineParams,
        values: ParamValues | None = None,
    ) -> Totals:
        """Match the stream that each call of ``pieces`` reads from its start (at least one
        piece, maybe of no tuples); each attempt opens ``sink`` anew, adds every piece's
        result to it in order and finishes it; an attempt that fails leaves its block with
        an exception, so that nothing it wrote remains. The totals of the attempt that
        completed."""
        ...


def read_input(path: str, nfa: Nfa) -> tuples_mod.Tuples:
    """The tuple file (CSV, Parquet, or a folder of Parquet part files) at ``path`` for the
    stream of ``nfa``, with every ORDER BY field checked; DataError names the offending row."""
    data = reader.read(path, nfa.program.schema)
    for f in nfa.program.order_fields:
        tuples_mod.check_order(data, f, ty=nfa.program.schema.field(f).type)
    return data


def read_pieces(
    path: str, nfa: Nfa, rows: int, first: int | None = None
) -> Iterator[tuples_mod.Tuples]:
    """:func:`read_input` in pieces of ``rows`` tuples, growing from ``first``
    (:func:`nfacep.io.reader.read_chunks`), every ORDER BY field checked across the pieces as
    well as within them."""
    before: dict[str, object] = {}
    for piece in reader.read_chunks(path, nfa.program.schema, rows, first=first):
        _check_order(piece, nfa, before)
        yield piece


def read_stream(
    path: str, nfa: Nfa, rows: int, first: int | None = None
) -> Iterator[tuple[tuples_mod.Tuples, bool]]:
    """:func:`read_pieces` as a matcher is fed them (:func:`nfacep.io.reader.read_stream`):
    each piece with whether it is the stream's last, a CSV file's pieces ending early
    towards its end, so that the last is small."""
    before: dict[str, object] = {}
    for piece, last in reader.read_stream(path, nfa.program.schema, rows, first=first):
        _check_order(piece, nfa, before)
        yield piece, last


def _check_order(piece: tuples_mod.Tuples, nfa: Nfa, before: dict[str, object]) -> None:
    """Every ORDER BY field of ``piece`` checked, from the value each had at the end of the
    pieces ``before`` it (updated)."""
    for f in nfa.program.order_fields:
        tuples_mod.check_order(piece, f, before=before.get(f), ty=nfa.program.schema.field(f).type)
        before[f] = piece.columns[f][-1]


def check_output(path: str | None, inputs: tuple[str | None, ...] = ()) -> None:
    """A UsageError, before any work, when the match file ``path`` or its summary could not
    be written (no such folder, a read-only one, a folder in their place) or is one of the
    ``inputs`` (the tuple file, the query file), also through a link."""
    if path is None:
        return
    check_outputs([path, summary_path(path)], inputs)


def run_files(
    backend: Backend,
    nfa: Nfa,
    input: str | tuples_mod.Tuples,
    output: str | None,
    params: EngineParams,
    *,
    query_file: str | None = None,
    values: ParamValues | None = None,
    chunk: int | None = None,
) -> Result | Totals:
    """What ``nfacep match``, ``sim`` and ``run`` do with their back-end: read ``input`` (a
    path, or tuples already read), run the back-end, write ``output`` (the match file and its
    summary; nothing when None), then raise the result's failure, if any.

    A back-end that takes the stream in pieces (:class:`Pieces`) reads a path ``chunk``
    (default :data:`~nfacep.limits.CHUNK`, or a :class:`Restarts` back-end's own ``chunk``)
    tuples at a time and returns the :class:`~nfacep.result.Totals` of the run (its matches
    went to ``output`` piece by piece); any other returns its :class:`Result`."""
    inputs = (query_file, input if isinstance(input, str) else None)
    folder = output is not None and is_folder(output)
    if output is not None and folder:
        output = check_folder(output, inputs)
    else:
        check_output(output, inputs)
    if isinstance(input, str) and isinstance(backend, Pieces):
        return _run_pieces(
            backend,
            nfa,
            input,
            output,
            params,
            query_file=query_file,
            values=values,
            chunk=CHUNK if chunk is None else chunk,
            folder=folder,
        )
    if folder:
        raise UsageError(
            f"--output {output}/: a Parquet folder of matches is what `nfacep match` "
            "writes; give a .csv file"
        )
    if isinstance(input, str) and isinstance(backend, Restarts):
        path = input
        rows = chunk if chunk is not None else int(getattr(backend, "chunk", CHUNK))

        def pieces() -> Iterator[tuples_mod.Tuples]:
            # the next piece read in a thread while this one is sent
            read = reader.prefetch(read_pieces(path, nfa, rows), "nfacep-read")
            with contextlib.closing(read):
                first = next(read, None)
                if first is None:  # no tuples: the input as a whole, its columns empty
                    yield read_input(path, nfa)
                    return
                yield first
                del first  # (not held while the rest is read)
                yield from read

        def sink() -> AbstractContextManager[Sink]:
            return open_sink(output, nfa, params, values, query_file=query_file, input=path)

        return backend.run_stream(nfa, pieces, sink, params, values)
    if isinstance(input, tuples_mod.Tuples):
        data, source = input, input.source
    else:
        data, source = read_input(input, nfa), input
    result = backend.run(nfa, data, params, values)
    if output is not None:
        write(result, output, query_file=query_file, input=source, program=nfa.program, tuples=data)
    if result.failure is not None:
        raise result.failure
    return result


def _run_pieces(
    backend: Pieces,
    nfa: Nfa,
    input: str,
    output: str | None,
    params: EngineParams,
    *,
    query_file: str | None,
    values: ParamValues | None,
    chunk: int,
    folder: bool = False,
) -> Totals:
    feed = backend.pieces(nfa, params, values)
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(
            open_sink(
                output, nfa, params, values, query_file=query_file, input=input, folder=folder
            )
        )
        # the next piece read in a thread while this one is matched; the first pieces
        # small, so that matching starts early (a stream of up to FIRST_PIECE tuples is one),
        # and the last small, so that little is left to match once the file is read
        first = min(chunk, FIRST_PIECE)
        read = reader.prefetch(read_stream(input, nfa, chunk, first), "nfacep-read")
        pieces = stack.enter_context(contextlib.closing(read))
        item = next(pieces, None)
        if item is None:  # no tuples: the input as a whole, its columns empty
            item = read_input(input, nfa), True
        while item is not None:
            # (a last piece the reader could not tell is fed as not the last: the same
            # matches, its state carried over for nothing)
            piece, last = item
            out.add(feed.feed(piece, last=last), piece)
            item = next(pieces, None)
        return out.finish()
