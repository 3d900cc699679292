"""DFA gateware, for the paper's NFA-versus-DFA comparison (§4.3–4.4, appendix D).

nfacep's engine runs NFAs; this module exists to measure what a DFA would cost instead. Each
query's NFA is turned into a DFA by subset construction over its predicate vectors
(:func:`nfacep.reference.dfa.build`, overlapping predicates included, §4.2), made a Moore machine
(the match flag is a property of the state, as in the paper's switch-case VHDL) and minimised, so a
query such as ``(0|1)* 1 (0|1){i}`` has the paper's ``1 + (2^(i+1) - 1)`` states. Two state
encodings, the paper's two DFA variants:

* :attr:`Encoding.ONE_HOT`: one flip-flop per DFA state (what Xilinx ISE chose for the paper's
  switch-case DFA);
* :attr:`Encoding.COMPRESSED`: a binary state register of ``ceil(log2 S)`` bits and a transition
  case table. The register is marked ``fsm_encoding = "none"`` so Yosys keeps the encoding
  instead of re-encoding it as an FSM.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Cat, Const, Module, Signal, Value
from amaranth.lib import wiring

from nfacep.nfa import Nfa, QueryNfa
from nfacep.reference import dfa as dfa_mod

from .nfa import matcher_signature
from .stream import StreamBuffer

__all__ = ["DfaMatcher", "Encoding", "MooreDfa", "moore_dfa"]


class Encoding(enum.Enum):
    """How a DFA's state is stored."""

    #: one flip-flop per state
    ONE_HOT = "one-hot"
    #: a binary state number, ``ceil(log2 S)`` flip-flops
    COMPRESSED = "compressed"


@dataclass(frozen=True)
class MooreDfa:
    """A minimal Moore DFA of one query over its own predicates.

    Symbol ``v`` is the predicate vector whose bit ``b`` is ``nfa.predicates[predicates[b]]``.
    State 0 is the initial state; states are numbered so that the matching ones come last
    (``output[s]`` is ``s >= first_match``).
    """

    #: next state per (state, symbol)
    table: np.ndarray
    #: per state: entering it reported a match
    output: np.ndarray
    #: the query's predicates, in symbol bit order
    predicates: tuple[int, ...]

    @property
    def states(self) -> int:
        return self.table.shape[0]

    @property
    def first_match(self) -> int:
        """The number of the first matching state (``states`` if none matches)."""
        hits = np.flatnonzero(self.output)
        return int(hits[0]) if len(hits) else self.states

    def shuffled(self, seed: int) -> MooreDfa:
        """The same DFA with its states renumbered at random, the initial state kept at 0 and
        the matching states kept last: a state assignment with no structure to exploit."""
        rng = np.random.default_rng(seed)
        first = self.first_match
        order = np.concatenate(
            [[0], 1 + rng.permutation(first - 1), first + rng.permutation(self.states - first)]
        ).astype(np.int64)
        number = np.empty_like(order)
        number[order] = np.arange(self.states)  # new number of old state order[k] is k
        return MooreDfa(number[self.table[order]], self.output[order].copy(), self.predicates)


def moore_dfa(nfa: Nfa, q: QueryNfa, *, max_states: int = 1 << 16) -> MooreDfa:
    """The minimal Moore DFA equivalent to query ``q`` of ``nfa``.

    A state is a pair (subset-construction state, whether the step into it matched), so a
    query with ``AFTER MATCH SKIP PAST LAST ROW`` (which empties its state set on a match) is a
    Moore machine too. Raises :class:`nfacep.reference.dfa.TooLarge` beyond ``max_states`` subsets.
    """
    used = tuple(nfa.predicates_of(q))
    symbols = dfa_mod.all_symbols(nfa, q)
    d = dfa_mod.build(nfa, q, dfa_mod.true_masks(nfa, q, symbols), max_states=max_states)
    n_sym = d.table.shape[1]
    # (state, hit) pairs reachable from (0, no match)
    index = {(0, False): 0}
    pairs = [(0, False)]
    rows = []
    k = 0
    while k < len(pairs):
        s = pairs[k][0]
        row = []
        for v in range(n_sym):
            nxt = (int(d.table[s, v]), bool(d.accept[s, v]))
            j = index.get(nxt)
            if j is None:
                j = index[nxt] = len(pairs)
                pairs.append(nxt)
            row.append(j)
        rows.append(row)
        k += 1
    table = np.array(rows, dtype=np.int64).reshape(len(pairs), n_sym)
    output = np.array([hit for _, hit in pairs], dtype=bool)
    # Moore partition refinement
    block = output.astype(np.int64)
    count = len(np.unique(block))
    while True:
        signature = np.concatenate([block[:, None], block[table]], axis=1)
        _, new = np.unique(signature, axis=0, return_inverse=True)
        new = new.ravel()
        new_count = int(new.max()) + 1
        block = new
        if new_count == count:
            break
        count = new_count
    # number the blocks: the initial state's first, then the others in order of first
    # appearance, the matching ones after all non-matching ones
    first: dict[int, int] = {}
    for pair, b in enumerate(block.tolist()):
        first.setdefault(b, pair)
    order = sorted(first, key=lambda b: (b != block[0], bool(output[first[b]]), first[b]))
    number = {b: n for n, b in enumerate(order)}
    reps = [first[b] for b in order]
    min_table = np.array(
        [[number[int(block[t])] for t in table[r]] for r in reps], dtype=np.int64
    ).reshape(len(reps), n_sym)
    min_output = output[reps].copy()
    return MooreDfa(min_table, min_output, used)


def _symbol_sets(row: np.ndarray) -> dict[int, list[int]]:
    """Target state → the symbols that lead there, for one state's row of the table."""
    targets: dict[int, list[int]] = {}
    for v, t in enumerate(row.tolist()):
        targets.setdefault(t, []).append(v)
    return targets


class DfaMatcher(wiring.Component):
    """Stand-alone DFA matcher, one DFA per query; a drop-in for :class:`nfacep.hdl.nfa.NfaMatcher`.

    Same contract as :class:`~nfacep.hdl.nfa.NfaMatcher`: takes one predicate vector per transfer
    and emits, one cycle later, the match bits of every query for that tuple together with the
    tuple's pass-through ``payload``; the match bits are exactly the NFA's. Latency 1 cycle;
    throughput 1 tuple per cycle; a stalled ``o_stream`` stalls ``i_stream`` and the state
    holds. The match bits are decoded from the state registers (a Moore machine).

    Parameters
    ----------
    nfa : :class:`nfacep.nfa.Nfa`
    payload_shape : shape of the pass-through payload
    encoding : :class:`Encoding`
    max_states : subset-construction states allowed per query
        (:class:`nfacep.reference.dfa.TooLarge`)
    shuffle : seed for :meth:`MooreDfa.shuffled`, or ``None`` to number the states in
        breadth-first order (which, for a language like ``(0|1)* 1 (0|1){i}``, makes the
        binary state a shift register of the input: see benchmarks/PAPER_FIGURES.md)

    Members
    -------
    i_stream : ``In(stream.Signature(StructLayout({"predicates": P, "payload": payload_shape})))``
    o_stream : ``Out(stream.Signature(StructLayout({"payload": payload_shape, "matches": Q})))``
    """

    def __init__(
        self,
        nfa: Nfa,
        payload_shape,
        encoding: Encoding = Encoding.ONE_HOT,
        *,
        max_states: int = 1 << 16,
        shuffle: int | None = None,
    ):
        self._nfa = nfa
        self._payload_shape = payload_shape
        self._encoding = Encoding(encoding)
        self._dfas = [moore_dfa(nfa, q, max_states=max_states) for q in nfa.queries]
        if shuffle is not None:
            self._dfas = [d.shuffled(shuffle + k) for k, d in enumerate(self._dfas)]
        super().__init__(matcher_signature(nfa, payload_shape))

    @property
    def nfa(self) -> Nfa:
        return self._nfa

    @property
    def encoding(self) -> Encoding:
        return self._encoding

    @property
    def dfas(self) -> list[MooreDfa]:
        """The minimal Moore DFA of each query, in ``nfa.queries`` order."""
        return list(self._dfas)

    @property
    def flipflops(self) -> int:
        """State flip-flops, all queries together."""
        if self._encoding is Encoding.ONE_HOT:
            return sum(d.states for d in self._dfas)
        return sum(max(d.states - 1, 0).bit_length() for d in self._dfas)

    def elaborate(self, platform):
        m = Module()
        preds = self.i_stream.payload.predicates
        # the output register holds the pass-through payload; the match bits are decoded from
        # the state registers, which change on the same edge
        m.submodules.output = output = StreamBuffer(self._payload_shape)
        take = Signal()
        m.d.comb += [
            output.i_stream.valid.eq(self.i_stream.valid),
            self.i_stream.ready.eq(output.i_stream.ready),
            output.i_stream.payload.eq(self.i_stream.payload.payload),
            take.eq(self.i_stream.valid & self.i_stream.ready),
            self.o_stream.valid.eq(output.o_stream.valid),
            output.o_stream.ready.eq(self.o_stream.ready),
            self.o_stream.payload.payload.eq(output.o_stream.payload),
        ]
        for q, d in zip(self._nfa.queries, self._dfas, strict=True):
            sym = Signal(len(d.predicates), name=f"{q.name}_symbol")
            m.d.comb += sym.eq(Cat(*(preds[p] for p in d.predicates)))
            if self._encoding is Encoding.ONE_HOT:
                match = self._one_hot(m, q, d, sym, take)
            else:
                match = self._compressed(m, q, d, sym, take)
            m.d.comb += self.o_stream.payload.matches[q.index].eq(match)
        return m

    @staticmethod
    def _one_hot(m: Module, q: QueryNfa, d: MooreDfa, sym: Value, take: Value) -> Value:
        n = d.states
        state = Signal(n, init=1, name=f"{q.name}_onehot")
        # per target state, the (state, symbols) pairs that lead to it
        into: list[list[Value]] = [[] for _ in range(n)]
        guards: dict[tuple[int, ...], Value] = {}
        all_symbols = 1 << len(sym)
        for s in range(n):
            for t, vs in _symbol_sets(d.table[s]).items():
                if len(vs) == all_symbols:
                    into[t].append(state[s])
                    continue
                key = tuple(vs)
                if key not in guards:
                    guard = Signal(name=f"{q.name}_sym_" + "_".join(map(str, vs)))
                    m.d.comb += guard.eq(sym.matches(*vs))
                    guards[key] = guard
                into[t].append(state[s] & guards[key])
        nxt = Signal(n, name=f"{q.name}_onehot_next")
        m.d.comb += nxt.eq(Cat(*(Cat(*terms).any() if terms else Const(0) for terms in into)))
        with m.If(take):
            m.d.sync += state.eq(nxt)
        hits = [state[s] for s in range(d.first_match, n)]
        return Cat(*hits).any() if hits else Const(0)

    @staticmethod
    def _compressed(m: Module, q: QueryNfa, d: MooreDfa, sym: Value, take: Value) -> Value:
        n = d.states
        state = Signal(range(max(n, 2)), name=f"{q.name}_state", attrs={"fsm_encoding": "none"})
        nxt = Signal.like(state, name=f"{q.name}_state_next")
        # states with the same row share a case
        by_row: dict[tuple[int, ...], list[int]] = {}
        for s in range(n):
            by_row.setdefault(tuple(d.table[s].tolist()), []).append(s)
        with m.Switch(state):
            for row, states in by_row.items():
                with m.Case(*states):
                    targets = _symbol_sets(np.array(row))
                    if len(targets) == 1:
                        m.d.comb += nxt.eq(next(iter(targets)))
                        continue
                    with m.Switch(sym):
                        for t, vs in targets.items():
                            with m.Case(*vs):
                                m.d.comb += nxt.eq(t)
            with m.Default():
                m.d.comb += nxt.eq(0)
        with m.If(take):
            m.d.sync += state.eq(nxt)
        if d.first_match >= n:
            return Const(0)
        return state >= d.first_match
