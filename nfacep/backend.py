"""The back-end seam: every engine that matches tuples is a :class:`Backend`.

A back-end takes the wired queries (:class:`~nfacep.nfa.Nfa`), the tuples
(:class:`~nfacep.tuples.Tuples`) and the engine's :class:`~nfacep.params.EngineParams`, and
returns a :class:`~nfacep.result.Result`. The reference matcher
(:class:`nfacep.reference.Reference`), the simulated gateware (:class:`nfacep.sim.Simulation`)
and a board over its link (:class:`nfacep.boards.host.UartBoard`, or
:class:`nfacep.boards.udp_host.UdpBoard` over UDP) are siblings behind it, as regex-automata's
engines are behind one NFA; a new engine (a compiled simulator) implements
:meth:`Backend.run` once and gets the match file, the summary, the report and the command
line's handling of them from :func:`run_files`.
"""

from __future__ import annotations

from typing import Protocol

from . import tuples as tuples_mod
from .nfa import Nfa
from .output import check_outputs, summary_path
from .params import EngineParams
from .result import Result, write
from .settings import ParamValues

__all__ = ["Backend", "read_input", "run_files"]


class Backend(Protocol):
    """An engine: matches tuples as the engine with some parameters does."""

    def run(self, nfa: Nfa, tuples: tuples_mod.Tuples, params: EngineParams,
            values: ParamValues | None = None) -> Result:
        """Match every query of ``nfa`` over ``tuples``, with the runtime parameters'
        ``values`` (None when the queries have none). Raises
        :class:`~nfacep.errors.NfacepError` subclasses for what a user can fix or must know
        (a missing simulator, a board that does not answer); a result it must report but that
        is not right (a simulation that differs from the reference) is returned with
        :attr:`Result.failure` set, so the files are still written."""
        ...


def read_input(path: str, nfa: Nfa) -> tuples_mod.Tuples:
    """The tuple file (CSV, Parquet, or a folder of Parquet part files) at ``path`` for the
    stream of ``nfa``, with every ORDER BY field checked; DataError names the offending row."""
    data = tuples_mod.read(path, nfa.program.schema)
    for f in nfa.program.order_fields:
        tuples_mod.check_order(data, f)
    return data


def check_output(path: str | None, inputs: tuple[str | None, ...] = ()) -> None:
    """A UsageError, before any work, when the match file ``path`` or its summary could not
    be written (no such folder, a read-only one, a folder in their place) or is one of the
    ``inputs`` (the tuple file, the query file), also through a link."""
    if path is None:
        return
    check_outputs([path, summary_path(path)], inputs)


def run_files(backend: Backend, nfa: Nfa, input: str | tuples_mod.Tuples, output: str | None,
              params: EngineParams, *, query_file: str | None = None,
              values: ParamValues | None = None) -> Result:
    """What ``nfacep match``, ``sim`` and ``run`` do with their back-end: read ``input`` (a
    path, or tuples already read), run the back-end, write ``output`` (the match file and its
    summary; nothing when None), then raise the result's failure, if any."""
    check_output(output, (query_file, input if isinstance(input, str) else None))
    if isinstance(input, tuples_mod.Tuples):
        data, source = input, input.source
    else:
        data, source = read_input(input, nfa), input
    result = backend.run(nfa, data, params, values)
    if output is not None:
        write(result, output, query_file=query_file, input=source)
    if result.failure is not None:
        raise result.failure
    return result
