"""The partitioner's capacity and timers, as a model over the sequence of partition keys.

Which tuples are dropped, and which start their partition from the null state vector, depends
only on the keys and on the hardware parameters (docs/language.md, 'Partitions, capacity and
timers'), never on predicates: so it is computed first, for all queries at once. The common
case (the partitioner never full) is computed with array operations; when it does fill up, an
exact sequential pass takes over.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ..params import EngineParams
from .loops import loops

__all__ = ["Admission", "Slots", "admit", "admit_sequential", "carry", "key_crc32", "table_slots"]


@dataclass
class Admission:
    codes: np.ndarray  #: partition key code of each tuple (0 … n_keys-1)
    admitted: np.ndarray  #: bool: the tuple reached its partition's state vector
    fresh: np.ndarray  #: bool: its partition started from the null state vector at this tuple

    @property
    def drops(self) -> np.ndarray:
        return np.flatnonzero(~self.admitted)


@dataclass(frozen=True)
class Slots:
    """Where ``--store table`` keeps each partition: ``bucket[c]`` is the bucket of the key with
    code ``c``, and a bucket holds at most ``capacity`` partitions."""

    bucket: np.ndarray
    capacity: int


def _crc32_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0xEDB88320), table >> 1)
    return table.astype(np.uint32)


_CRC32 = _crc32_table()


def key_crc32(raw: np.ndarray, key_bits: int) -> np.ndarray:
    """CRC-32 (the ISO-HDLC one of zlib, Ethernet and
    ``amaranth.lib.crc.catalog.CRC32_ISO_HDLC``) of each raw key
    (:func:`nfacep.wire.raw_column`) taken as ``ceil(key_bits / 8)`` bytes, little-endian;
    uint32."""
    raw = np.asarray(raw, dtype=np.uint64)
    crc = np.full(len(raw), 0xFFFFFFFF, dtype=np.uint32)
    for i in range((key_bits + 7) // 8):
        byte = ((raw >> np.uint64(8 * i)) & np.uint64(0xFF)).astype(np.uint32)
        crc = _CRC32[(crc ^ byte) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


def table_slots(raw: np.ndarray, key_bits: int, params: EngineParams) -> Slots:
    """The buckets of ``--store table`` for the distinct raw keys ``raw``.

    A key of at most ``params.index_bits`` bits indexes the table directly: every key has an
    entry of its own (a bucket of one), so no tuple is ever dropped. A wider key goes to bucket
    ``key_crc32(key) mod (partitions / ways)``, which holds ``ways`` partitions.
    """
    raw = np.asarray(raw, dtype=np.uint64)
    if key_bits <= params.index_bits:
        return Slots(raw.astype(np.int64), 1)
    mask = np.uint32((1 << params.bucket_bits) - 1)
    return Slots((key_crc32(raw, key_bits) & mask).astype(np.int64), params.ways)


def _narrow(codes: np.ndarray) -> np.ndarray:
    """``codes`` (non-negative) in the narrowest unsigned type that holds them: numpy's
    stable sort is a radix sort for 8- and 16-bit integers, several times faster than on
    int64 at millions of tuples."""
    top = int(codes.max()) if len(codes) else 0
    for dtype in (np.uint8, np.uint16):
        if top <= np.iinfo(dtype).max:
            return codes.astype(dtype)
    return codes


def _first_of_each(codes: np.ndarray) -> np.ndarray:
    """The index of the first tuple of each code that occurs, in increasing order."""
    first = _first_index(codes, int(codes.max()) + 1)
    return np.sort(first[first < len(codes)])


def _first_index(codes: np.ndarray, keys: int) -> np.ndarray:
    """Per code ``0 … keys-1``, the index of its first tuple (``len(codes)`` if none)."""
    compiled = loops(len(codes), "first_index")
    if compiled is not None:
        return compiled.first_index(codes, keys)
    first = np.full(keys, len(codes), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(codes), dtype=np.int64))
    return first


def _prev_same(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stable grouping by code; index of the previous tuple with the same code (or -1)."""
    narrow = _narrow(codes)
    order = np.argsort(narrow, kind="stable")
    prev = np.empty(len(codes), dtype=np.int64)
    prev[order[1:]] = order[:-1]
    # each code's group starts where the counts of the smaller codes end: no previous tuple
    counts = np.bincount(narrow)
    heads = np.cumsum(counts) - counts
    heads = heads[heads < len(codes)]
    prev[order[heads]] = -1
    return order, prev


def admit(
    codes: np.ndarray,
    params: EngineParams,
    slots: Slots | None = None,
    *,
    offset: int = 0,
    last: np.ndarray | None = None,
) -> Admission:
    """Model the partition store of an engine with ``params``: ``partitions`` elements with
    ``timer_bits`` timers and a tick per ``tick_tuples``; with ``--store table``, ``slots``
    says where each key's partition goes (:func:`table_slots`).

    An element is set to ``2**timer_bits - 1`` whenever a tuple of its partition is processed;
    with ticks numbered from 1, tick *t* happens right after tuple ``t*K - 1``. A tuple processed
    at index *i* was followed by ``i // K`` … ticks; its element is freed by tick
    ``i // K + M``, so the next tuple *j* of that partition finds it iff ``j // K < i // K + M``.

    With ``--store table`` and ticks the same holds per bucket: a tuple is dropped when its
    bucket's ``capacity`` elements are all in use.

    A stream may come in pieces: ``codes`` are then the tuples from stream position ``offset``
    on, and ``last[c]`` is the position of the last tuple of key code ``c`` that the earlier
    pieces admitted (-1 for none; one entry for every code of the piece; :func:`carry` brings
    it up to date after each piece). What the store holds at ``offset`` follows from ``last``
    alone: the partitions whose element no tick has freed yet. They are put before the piece
    as one tuple each, at their last positions, and the piece is then admitted as a whole
    stream would be.

    Every array value stays below ``n + 2**33`` for the parameters' limits (``K`` and ``M``
    below ``2**32``), or ``2**16`` times that for the table's buckets, so int64 never
    overflows.
    """
    n = len(codes)
    codes = np.asarray(codes)
    ahead = np.zeros(0, dtype=np.int64)
    if last is not None and n and not params.tick_tuples and params.store == "pipeline":
        # no ticks: what the store holds stays; when it and the piece's keys fit, the piece
        # is all admitted and the keys it brings to the store start fresh
        held = last >= 0
        first = _first_index(codes, len(last))
        seen = first < n
        if np.count_nonzero(held | seen) <= params.partitions:
            fresh = np.zeros(n, dtype=bool)
            fresh[first[seen & ~held]] = True
            return Admission(codes, np.ones(n, dtype=bool), fresh)
    if last is not None and n:
        k, m = params.tick_tuples, (1 << params.timer_bits) - 1
        held = last >= 0
        if k:  # freed by tick last // k + m, unless it comes after tuple offset - 1
            held &= offset // k < last // k + m
        ahead = np.flatnonzero(held)
        ahead = ahead[np.argsort(last[ahead], kind="stable")]
    if last is None or not len(ahead):
        return _admit(
            codes, lambda: np.arange(offset, offset + n, dtype=np.int64), offset + n, params, slots
        )
    before = last[ahead]
    a = _admit(
        np.concatenate([ahead.astype(codes.dtype), codes]),
        lambda: np.concatenate([before, np.arange(offset, offset + n, dtype=np.int64)]),
        offset + n,
        params,
        slots,
    )
    v = len(ahead)
    return Admission(a.codes[v:], a.admitted[v:], a.fresh[v:])


def carry(last: np.ndarray, admission: Admission, offset: int) -> None:
    """Bring ``last`` (:func:`admit`'s) up to date with the piece from stream position
    ``offset`` that ``admission`` admitted, for the piece after it."""
    compiled = loops(len(admission.codes), "carry_last")
    if compiled is not None:
        compiled.carry_last(last, admission.codes, admission.admitted, offset)
        return
    idx = np.flatnonzero(admission.admitted)
    np.maximum.at(last, admission.codes[idx], offset + idx)


def _admit(
    codes: np.ndarray, positions, end: int, params: EngineParams, slots: Slots | None
) -> Admission:
    """:func:`admit` of the tuples at the stream positions ``positions()`` (increasing; made
    only where they matter), the stream ending before position ``end``."""
    n = len(codes)
    if n == 0:
        return Admission(codes, np.zeros(0, dtype=bool), np.zeros(0, dtype=bool))
    if params.tabled:
        if slots is None:
            raise ValueError(f"--store {params.store} needs the keys' slots")
        if not params.tick_tuples:
            return _admit_table(codes, slots)
    partitions = params.partitions
    k, m = params.tick_tuples, (1 << params.timer_bits) - 1
    if not k:
        # no ticks: a partition, once stored, stays, so only the first tuple of each key is
        # fresh and the partitioner fills iff more keys come than it stores
        first = _first_of_each(codes)
        fresh = np.zeros(n, dtype=bool)
        fresh[first] = True
        if len(first) <= partitions:
            return Admission(codes, np.ones(n, dtype=bool), fresh)
        return _sequential(codes, positions(), params, slots)
    pos = positions()
    order, prev = _prev_same(codes)
    fresh = (prev < 0) | (pos // k >= pos[prev] // k + m)
    # Each run of a partition between fresh starts holds one element from its first tuple
    # until the tick that frees it, which happens right after tuple `expire`.
    starts = np.flatnonzero(fresh)
    # in grouped order a segment ends right before the next fresh tuple
    seg_heads = np.flatnonzero(fresh[order])
    last = pos[order[np.append(seg_heads[1:] - 1, n - 1)]]
    # (last // k + m) * k - 1, but no later than end (past the stream: never within it):
    # at the limits (k and m near 2**32) the product does not fit an int64
    tick = np.minimum(last // k + m, end // k + 1)
    expire = tick * k - 1
    if slots is not None:  # the table with timers: the limit is per bucket
        # elements in use in a fresh tuple's bucket just before it, counted on one line per
        # bucket: bucket * span + position (span > every expire, so buckets do not mix)
        span = np.int64(end + k + 1)
        bucket = slots.bucket[codes[order[seg_heads]]]
        began = np.sort(bucket * span + pos[order[seg_heads]])
        ended = np.sort(bucket * span + expire)
        here = slots.bucket[codes[starts]] * span
        at = here + pos[starts]
        occupied = (
            np.searchsorted(began, at, "left")
            - np.searchsorted(began, here, "left")
            - np.searchsorted(ended, at, "left")
            + np.searchsorted(ended, here, "left")
        )
        partitions = slots.capacity
    else:
        # elements in use just before each fresh tuple: started earlier, not yet freed
        occupied = np.arange(len(starts)) - np.searchsorted(np.sort(expire), pos[starts], "left")
    if len(starts) == 0 or occupied.max() < partitions:
        return Admission(codes, np.ones(n, dtype=bool), fresh)
    return _sequential(codes, pos, params, slots)


def _admit_table(codes: np.ndarray, slots: Slots) -> Admission:
    """The table without timers: a partition, once stored, stays; so in each bucket the first
    ``capacity`` keys to arrive are stored and every tuple of a later key is dropped."""
    n, keys = len(codes), len(slots.bucket)
    first = _first_index(codes, keys)  # first arrival of each key (n for one that never comes)
    # rank of each key among its bucket's keys, by first arrival
    order = np.lexsort((first, slots.bucket))
    bucket = slots.bucket[order]
    heads = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    rank = np.empty(keys, dtype=np.int64)
    rank[order] = np.arange(keys) - np.repeat(heads, np.diff(np.r_[heads, keys]))
    admitted = (rank < slots.capacity)[codes]
    fresh = np.zeros(n, dtype=bool)
    fresh[first[first < n]] = True
    return Admission(codes, admitted, fresh & admitted)


def admit_sequential(
    codes: np.ndarray, params: EngineParams, slots: Slots | None = None
) -> Admission:
    """:func:`admit`'s result by the definition, one tuple at a time: an exact pass that
    :func:`admit` takes when the partitioner fills (its array operations model only the case
    where it never does)."""
    return _sequential(codes, np.arange(len(codes), dtype=np.int64), params, slots)


def _sequential(
    codes: np.ndarray, pos: np.ndarray, params: EngineParams, slots: Slots | None
) -> Admission:
    """:func:`admit_sequential` of the tuples at the stream positions ``pos`` (increasing)."""
    tick_tuples = params.tick_tuples
    timer_max = (1 << params.timer_bits) - 1
    if params.tabled:
        if slots is None:
            raise ValueError(f"--store {params.store} needs the keys' slots")
        bucket_of, capacity = slots.bucket.tolist(), slots.capacity
    else:
        bucket_of, capacity = None, params.partitions
    held: dict[int, int] = {}  # bucket -> partitions stored in it
    n = len(codes)
    admitted = np.ones(n, dtype=bool)
    fresh = np.zeros(n, dtype=bool)
    expires: dict[int, int] = {}  # code -> number of ticks after which it is freed
    heap: list[tuple[int, int]] = []
    never = 1 << 62
    for i, (c, p) in enumerate(zip(codes.tolist(), pos.tolist(), strict=True)):
        ticks = p // tick_tuples if tick_tuples else 0
        while heap and heap[0][0] <= ticks:
            when, code = heapq.heappop(heap)
            if expires.get(code) == when:
                del expires[code]
                b = bucket_of[code] if bucket_of else 0
                held[b] -= 1
        if c not in expires:
            b = bucket_of[c] if bucket_of else 0
            if held.get(b, 0) >= capacity:
                admitted[i] = False
                continue
            held[b] = held.get(b, 0) + 1
            fresh[i] = True
        when = ticks + timer_max if tick_tuples else never
        expires[c] = when
        if tick_tuples:
            heapq.heappush(heap, (when, c))
    return Admission(codes, admitted, fresh)
