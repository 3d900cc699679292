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
(:func:`nfacep.io.reader.read_chunks`), feeds each piece and writes its matches before the next
is read, so that the memory a run needs does not grow with the input.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from .errors import UsageError
from .io import reader
from .io import tuples as tuples_mod
from .limits import CHUNK
from .nfa import Nfa
from .output import check_folder, check_outputs, is_folder, summary_path
from .params import EngineParams
from .result import Result, Totals, match_file, match_folder, write
from .settings import ParamValues

__all__ = ["Backend", "Feed", "Pieces", "read_input", "read_pieces", "run_files"]


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


def read_input(path: str, nfa: Nfa) -> tuples_mod.Tuples:
    """The tuple file (CSV, Parquet, or a folder of Parquet part files) at ``path`` for the
    stream of ``nfa``, with every ORDER BY field checked; DataError names the offending row."""
    data = reader.read(path, nfa.program.schema)
    for f in nfa.program.order_fields:
        tuples_mod.check_order(data, f, ty=nfa.program.schema.field(f).type)
    return data


def read_pieces(path: str, nfa: Nfa, rows: int) -> Iterator[tuples_mod.Tuples]:
    """:func:`read_input` in pieces of ``rows`` tuples (:func:`nfacep.io.reader.read_chunks`),
    every ORDER BY field checked across the pieces as well as within them."""
    before: dict[str, object] = {}
    for piece in reader.read_chunks(path, nfa.program.schema, rows):
        for f in nfa.program.order_fields:
            tuples_mod.check_order(
                piece, f, before=before.get(f), ty=nfa.program.schema.field(f).type
            )
            before[f] = piece.columns[f][-1]
        yield piece


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
    chunk: int = CHUNK,
) -> Result | Totals:
    """What ``nfacep match``, ``sim`` and ``run`` do with their back-end: read ``input`` (a
    path, or tuples already read), run the back-end, write ``output`` (the match file and its
    summary; nothing when None), then raise the result's failure, if any.

    A back-end that takes the stream in pieces (:class:`Pieces`) reads a path ``chunk``
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
            chunk=chunk,
            folder=folder,
        )
    if folder:
        raise UsageError(
            f"--output {output}/: a Parquet folder of matches is what `nfacep match` "
            "writes; give a .csv file"
        )
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
    names = tuple(q.name for q in nfa.queries)
    feed = backend.pieces(nfa, params, values)
    totals = Totals(names, params, values)
    with contextlib.ExitStack() as stack:
        rows = None
        if output is not None:
            # a Parquet folder of part files (``--output M/``), or the match CSV
            opener = match_folder if folder else match_file
            rows = stack.enter_context(opener(output, nfa.program))
        # the next piece read in a thread while this one is matched
        pieces = stack.enter_context(
            contextlib.closing(reader.prefetch(read_pieces(input, nfa, chunk), "nfacep-read"))
        )
        piece = next(pieces, None)
        if piece is None:  # no tuples: the input as a whole, its columns empty
            piece = read_input(input, nfa)
        while piece is not None:
            # a piece shorter than the others is the last (read_chunks' pieces are all
            # `chunk` tuples but the last); one as long may be too, and is carried over
            result = feed.feed(piece, last=piece.n < chunk)
            if result.failure is not None:
                raise result.failure
            if rows is not None:
                rows.write(result, piece)
            totals.add(result)
            piece = next(pieces, None)
        if rows is not None:
            rows.finish(totals.summary(query_file=query_file, input=input))
    return totals
