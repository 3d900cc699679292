"""The matches of a stream during which a programmable board switched queries (``nfacep load``
while ``nfacep run --udp`` streams, docs/formats.md "A switch during `nfacep run --udp`"): a
piece's results of each file in force joined into one :class:`~nfacep.result.Result`
(:func:`joined`), and their measure columns, each file's measured by its own
:class:`~nfacep.measures.Measurer` (:func:`switched_cells`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .measures import Measurer

__all__ = ["joined", "switched_cells"]


def joined(parts: list):
    """One result of the ``parts`` of a piece that a switch of queries cut: ``(first seq, the
    part's Result, its file's Program)`` in seq order, each of its own file's queries. Its
    ``names`` are every part's, in order of first appearance (a name in several files is one
    query of the match file), and its ``files`` say which file each match is of. The first
    part's other fields (counters, status, ...) are kept."""
    names: list[str] = []
    for _, part, _ in parts:
        names += [n for n in part.names if n not in names]
    queries = [
        np.array([names.index(n) for n in part.names], dtype=np.int64)[part.queries]
        for _, part, _ in parts
    ]
    starts = [part.starts for _, part, _ in parts]
    return dataclasses.replace(
        parts[0][1],
        names=tuple(names),
        seqs=np.concatenate([part.seqs for _, part, _ in parts]),
        queries=np.concatenate(queries),
        partitions=[p for _, part, _ in parts for p in part.partitions],
        drops=np.concatenate([part.drops for _, part, _ in parts]),
        starts=None if any(b is None for b in starts) else np.concatenate(starts),
        files=tuple((at, program) for at, _, program in parts),
    )


def switched_cells(rows, result, tuples) -> list[list[str]]:
    """The measure columns of the match file ``rows`` (a :class:`~nfacep.result.MatchRows`
    with measures) for a ``result`` that a switch of queries cut (its ``files``): each file's
    matches measured by a Measurer of that file (the match file's own for the file it was
    opened for, another from the switch on for a loaded one), each measure in the match
    file's column of its name (the host checked that there is one), empty where a query has
    none."""
    base = rows.measurer
    where = {m.key: c for c, m in enumerate(base.columns)}
    out = [[""] * len(result.seqs) for _ in base.columns]
    ends = [at for at, _ in result.files[1:]] + [None]
    for (at, program), end in zip(result.files, ends, strict=True):
        inside = result.seqs >= at
        if end is not None:
            inside &= result.seqs < end
        chosen = np.flatnonzero(inside)
        measurer = base if program is base.program else rows.measurers.get(at)
        if measurer is None:
            measurer = rows.measurers[at] = Measurer(program)
        index = {q.name: k for k, q in enumerate(program.queries)}
        mine = np.array([index.get(name, -1) for name in result.names], dtype=np.int64)
        part = dataclasses.replace(
            result,
            seqs=result.seqs[chosen],
            queries=mine[result.queries[chosen]],
            partitions=[result.partitions[r] for r in chosen.tolist()],
            starts=None if result.starts is None else result.starts[chosen],
            files=(),
        )
        measurer.n = rows.fed  # (a file's measurer is fed only the pieces it is in)
        for m, cells in zip(measurer.columns, measurer.cells(part, tuples), strict=True):
            column = out[where[m.key]]
            for r, text in zip(chosen.tolist(), cells, strict=True):
                column[r] = text
    return out
