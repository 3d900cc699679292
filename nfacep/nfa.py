"""The NFA model: the paper's wiring algorithm (§4.5–4.6) applied to checked queries.

One state per pattern leaf (after counted repetition and PERMUTE are expanded), each
guarded by one predicate (a decoder bit) or by none (a variable DEFINE leaves out, or ``.``).
State *i* is set after a tuple iff its predicate holds for that tuple and it is activated:
either by default (a start state: a match may begin at any tuple) or because a state in its
activation set was set after the previous tuple. A query reports a match at a tuple iff one
of its accepting states is set after it. The model knows nothing of parsing or gateware.

Several queries sit side by side in one :class:`Nfa` (their states concatenated) and share
one deduplicated predicate table, the predicate decoder's outputs.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from dataclasses import dataclass

from .errors import QueryError
from .lang import ast
from .lang import predicates as P
from .limits import MAX_FILE_STATES, MAX_STATES, MAX_WIRES
from .schema import Program

__all__ = ["Nfa", "Predicate", "QueryNfa", "State", "age_bits", "build", "start_bits"]

START = -1  # the paper's '1' in an activation set: active by default
_START = frozenset({START})


@dataclass(frozen=True)
class Predicate:
    index: int
    expr: P.PExpr

    @property
    def text(self) -> str:
        return P.render(self.expr)


def age_bits(window: int) -> int:
    """Bits of a run's age under ``WITHIN window``: ages run from 0 to ``window - 1``."""
    return max(1, (window - 1).bit_length())


def start_bits(window: int) -> int:
    """Bits of a run's start under ``WITHIN window``: the low bits of the ORDER BY value of the
    tuple the run began at, modulo ``2**start_bits`` (they wrap). One more than
    :func:`age_bits`, so that ``2**start_bits >= 2 * window``: a run a tuple can still extend
    was live at the partition's last tuple (less than the window old) and that tuple is less
    than the window before this one, so the run is less than ``2 * window`` old, and the
    difference of the low bits modulo ``2**start_bits`` is its age exactly."""
    return age_bits(window) + 1


@dataclass(frozen=True)
class State:
    index: int
    query: int
    var: str  #: the pattern variable, or "." for the wildcard
    predicate: int | None  #: index into :attr:`Nfa.predicates`; None: true for every tuple
    activation: frozenset[int]  #: states whose output activates this one
    start: bool  #: activated by default ('1' in the paper's activation set)
    accepting: bool

    @property
    def name(self) -> str:
        return f"st{self.index}_{'any' if self.var == '.' else self.var}"


@dataclass(frozen=True)
class QueryNfa:
    index: int
    name: str
    first: int  #: index of the query's first state
    count: int  #: number of states
    skip_past_last_row: bool
    nullable: bool  #: the pattern also matches the empty sequence (never reported)
    #: WITHIN: matches span less than this in ``order_field`` (None: no window)
    window: int | None = None
    order_field: str | None = None
    #: ``MEASURES FIRST(seq) AS start_seq``: a match reports the latest start of its runs
    start_seq: bool = False

    @property
    def states(self) -> range:
        return range(self.first, self.first + self.count)


@dataclass(frozen=True)
class Nfa:
    predicates: tuple[Predicate, ...]
    states: tuple[State, ...]
    queries: tuple[QueryNfa, ...]
    program: Program

    def accepting(self, q: QueryNfa) -> list[int]:
        return [i for i in q.states if self.states[i].accepting]

    @functools.cached_property
    def history(self) -> dict[str, int]:
        """The fields the predicates read with PREV, each with how many of its last values a
        partition keeps (:func:`nfacep.lang.predicates.history`); empty without PREV."""
        from .lang.predicates import history

        return history(p.expr for p in self.predicates)

    def predicates_of(self, q: QueryNfa) -> list[int]:
        """The predicates the query's states test, in ascending order."""
        return sorted({p for i in q.states if (p := self.states[i].predicate) is not None})

    def dump(self) -> str:
        """Stable text form: predicates, then one line per state (golden tests, explain)."""
        lines = []
        for p in self.predicates:
            lines.append(f"p{p.index}: {p.text}")
        for q in self.queries:
            skip = " skip-past-last-row" if q.skip_past_last_row else ""
            if q.window is not None:
                skip += f" within {q.window} ({q.order_field})"
            if q.start_seq:
                skip += " start_seq"
            lines.append(f"query {q.name}: states {q.first}..{q.first + q.count - 1}{skip}")
            for i in q.states:
                acc = " accept" if self.states[i].accepting else ""
                lines.append(self.state_line(i) + acc)
        return "\n".join(lines)

    def state_line(self, i: int, start: str = "1") -> str:
        """State ``i`` as :meth:`dump` and ``nfacep explain`` show it: ``  name [predicate] <-
        {activation}``, the always-true input of a start state named ``start`` (the paper's
        ``1``)."""
        s = self.states[i]
        act = [start] if s.start else []
        act += [self.states[j].name for j in sorted(s.activation)]
        pred = "true" if s.predicate is None else f"p{s.predicate}"
        return f"  {s.name} [{pred}] <- {{{', '.join(act)}}}"

    def dot(self) -> str:
        """Graphviz: one node per state, an edge per activation wire, start states fed by 1."""
        out = ["digraph nfa {", "  rankdir=LR;", '  node [shape=circle, fontname="monospace"];']
        for q in self.queries:
            out.append(f'  subgraph "cluster_{q.name}" {{')
            out.append(f'    label="{q.name}";')
            out.append(f'    "start_{q.name}" [shape=point, label=""];')
            for i in q.states:
                s = self.states[i]
                pred = "true" if s.predicate is None else self.predicates[s.predicate].text
                pred = pred.replace("\\", "\\\\").replace('"', '\\"')
                shape = "doublecircle" if s.accepting else "circle"
                out.append(f'    "{s.name}" [shape={shape}, label="{s.var}\\n{pred}"];')
                if s.start:
                    out.append(f'    "start_{q.name}" -> "{s.name}";')
                for j in sorted(s.activation):
                    out.append(f'    "{self.states[j].name}" -> "{s.name}";')
            out.append("  }")
        out.append("}")
        return "\n".join(out) + "\n"


# --- expansion of counted repetition and PERMUTE ----------------------------------------------

_SHOWN = 10**12  # state counts up to this are shown exactly in the error


def _size(p: ast.Pattern, cap: int = MAX_STATES + 1) -> int:
    """Number of leaves after expansion, computed without expanding and saturated at ``cap``
    (so that PERMUTE of many items or nested counts cost nothing to measure)."""
    match p:
        case ast.Var() | ast.Wildcard():
            return 1
        case ast.Empty():
            return 0
        case ast.Seq(items) | ast.Alt(items):
            total = 0
            for i in items:
                total = min(cap, total + _size(i, cap))
            return total
        case ast.Permute(items):
            # each item appears once in each of the n! orders
            total = 0
            for i in items:
                total = min(cap, total + _size(i, cap))
            for k in range(2, len(items) + 1):
                if total == 0 or total >= cap:
                    break
                total = min(cap, total * k)
            return total
        case ast.Repeat(child, lo, hi):
            copies = max(lo, 1) if hi is None else hi
            return min(cap, _size(child, cap) * copies)
    raise TypeError(p)


def _prune(p: ast.Pattern) -> ast.Pattern:
    """Replace every sub-pattern without a leaf by ``()``, drop ``()`` from sequences and keep
    one in an alternation. A pattern without a leaf matches only the empty sequence and wires
    as the identity, so the NFA is the same; but the expansion no longer copies what makes no
    state (``(B{0}){4000}``, ``PERMUTE((), ())``, ``(A () () …){4096}``): afterwards every node
    is above a state but for one ``()`` per alternation and the ``()`` items of a PERMUTE, so
    the expanded tree has a few times states × depth nodes at most."""
    if _size(p) == 0:
        return ast.Empty(pos=p.pos)
    match p:
        case ast.Seq(items):
            kept = [_prune(i) for i in items if _size(i) > 0]
            return kept[0] if len(kept) == 1 else dataclasses.replace(p, items=tuple(kept))
        case ast.Alt(items):
            kept = [_prune(i) for i in items if _size(i) > 0]
            if len(kept) < len(items):  # one empty alternative stands for all of them
                kept.append(ast.Empty(pos=p.pos))
            return dataclasses.replace(p, items=tuple(kept))
        case ast.Permute(items):
            return dataclasses.replace(p, items=tuple(_prune(i) for i in items))
        case ast.Repeat(child):
            return dataclasses.replace(p, child=_prune(child))
    return p


def _expand(p: ast.Pattern) -> ast.Pattern:
    """Rewrite into Var/Wildcard/Empty/Seq/Alt and Repeat with (0,1), (0,None), (1,None)."""
    match p:
        case ast.Var() | ast.Wildcard() | ast.Empty():
            return dataclasses.replace(p)  # a fresh node: every copy is its own state
        case ast.Seq(items):
            return ast.Seq(tuple(_expand(i) for i in items), pos=p.pos)
        case ast.Alt(items):
            return ast.Alt(tuple(_expand(i) for i in items), pos=p.pos)
        case ast.Permute(items):
            orders = itertools.permutations(items)
            return ast.Alt(
                tuple(ast.Seq(tuple(_expand(i) for i in order), pos=p.pos) for order in orders),
                pos=p.pos,
            )
        case ast.Repeat(child, lo, hi):
            if (lo, hi) in ((0, 1), (0, None), (1, None)):
                return ast.Repeat(_expand(child), lo, hi, pos=p.pos)
            if hi == 0:
                return ast.Empty(pos=p.pos)
            if hi is None:  # r{n,} = r^(n-1) r+
                parts = [_expand(child) for _ in range(lo - 1)]
                parts.append(ast.Repeat(_expand(child), 1, None, pos=p.pos))
            else:  # r{n,m} = r^n (r?)^(m-n)
                parts = [_expand(child) for _ in range(lo)]
                parts += [ast.Repeat(_expand(child), 0, 1, pos=p.pos) for _ in range(hi - lo)]
            return ast.Seq(tuple(parts), pos=p.pos)
    raise TypeError(p)


# --- the wiring algorithm ---------------------------------------------------------------------


class _TooManyWires(Exception):
    pass


class _Wiring:
    """Traverse the expanded AST passing a set of activation signals down (paper §4.6).

    ``budget`` is the most activation wires the states may take together: wiring stops, with
    :class:`_TooManyWires`, as soon as it is spent, so that memory stays bounded."""

    def __init__(self, budget: int):
        self.leaves: list[ast.Var | ast.Wildcard] = []
        self.activation: list[frozenset[int]] = []
        self._ids: dict[int, int] = {}
        self.budget = budget

    def number(self, p: ast.Pattern) -> None:
        """Give every leaf occurrence its state number, left to right."""
        match p:
            case ast.Var() | ast.Wildcard():
                self._ids[id(p)] = len(self.leaves)
                self.leaves.append(p)
                self.activation.append(frozenset())
            case ast.Seq(items) | ast.Alt(items):
                for i in items:
                    self.number(i)
            case ast.Repeat(child):
                self.number(child)

    def outputs(self, p: ast.Pattern) -> frozenset[int]:
        """The output signals a sub-expression returns when passed the empty set (step 5-6)."""
        match p:
            case ast.Var() | ast.Wildcard():
                return frozenset({self._ids[id(p)]})
            case ast.Empty():
                return frozenset()
            case ast.Seq(items):
                out: frozenset[int] = frozenset()
                for i in items:
                    out = self.outputs(i) | (out if _nullable(i) else frozenset())
                return out
            case ast.Alt(items):
                return frozenset().union(*(self.outputs(i) for i in items))
            case ast.Repeat(child):
                return self.outputs(child)
        raise TypeError(p)

    def wire(self, p: ast.Pattern, act: frozenset[int]) -> frozenset[int]:
        match p:
            case ast.Var() | ast.Wildcard():  # (2) apply the activation set, return own output
                n = self._ids[id(p)]
                self.activation[n] = act
                self.budget -= len(act)
                if self.budget < 0:
                    raise _TooManyWires
                return frozenset({n})
            case ast.Empty():
                return act
            case ast.Seq(items):  # (1), (3): left to right, each child's outputs feed the next
                for i in items:
                    act = self.wire(i, act)
                return act
            case ast.Alt(items):
                return frozenset().union(*(self.wire(i, act) for i in items))
            case ast.Repeat(child, 0, None):  # (5)-(8): closure merges its own outputs in
                merged = act | self.outputs(child)
                self.wire(child, merged)
                return merged
            case ast.Repeat(child, 1, None):  # r+: like r*, but the input does not pass through
                merged = act | self.outputs(child)
                return self.wire(child, merged)
            case ast.Repeat(child, 0, 1):
                return self.wire(child, act) | act
        raise TypeError(p)


def _nullable(p: ast.Pattern) -> bool:
    match p:
        case ast.Var() | ast.Wildcard():
            return False
        case ast.Empty():
            return True
        case ast.Seq(items):
            return all(_nullable(i) for i in items)
        case ast.Alt(items):
            return any(_nullable(i) for i in items)
        case ast.Repeat(child, lo):
            return lo == 0 or _nullable(child)
    raise TypeError(p)


def build(program: Program) -> Nfa:
    """Wire every query of a checked program into one :class:`Nfa`."""
    predicates: dict[P.PExpr, int] = {}
    budget = MAX_WIRES  # activation wires left for the queries still to wire
    states: list[State] = []
    queries: list[QueryNfa] = []
    for qi, q in enumerate(program.queries):
        size = _size(q.pattern, cap=_SHOWN)
        if size > MAX_STATES:
            count = f"{size}" if size < _SHOWN else f"more than {_SHOWN}"
            raise QueryError(
                f"query '{q.name}' expands to {count} NFA states, more than the "
                f"limit of {MAX_STATES}, the states of one engine (counted repetition "
                "and PERMUTE copy their operands)",
                q.pattern.pos or q.pos,
            )
        if len(states) + size > MAX_FILE_STATES:
            raise QueryError(
                f"query '{q.name}' brings the file's NFA states to "
                f"{len(states) + size}, more than the {MAX_FILE_STATES} nfacep "
                f"models for one file (the gateware takes {MAX_STATES})",
                q.pattern.pos or q.pos,
            )
        expanded = _expand(_prune(q.pattern))
        w = _Wiring(budget)
        w.number(expanded)
        try:
            final = w.wire(expanded, frozenset({START}))
        except _TooManyWires:
            raise QueryError(
                f"query '{q.name}' needs more than {MAX_WIRES} activation wires"
                + (" with the queries before it" if states else "")
                + ", more than one engine can hold: a state is wired to every state that may "
                "precede it, so repeating an optional or starred operand n times (A{0,n}, "
                "(A*){n}) makes about n²/2 wires",
                q.pattern.pos or q.pos,
            ) from None
        first = len(states)
        for n, leaf in enumerate(w.leaves):
            if isinstance(leaf, ast.Wildcard):
                var, expr = ".", None
            else:
                var, expr = leaf.name, q.predicates.get(leaf.name)
            pidx = None
            if expr is not None:
                pidx = predicates.setdefault(expr, len(predicates))
            act = w.activation[n]
            start = START in act
            if start:
                act = act - _START
            if first:  # set operations in C: a query may have millions of activation wires
                act = frozenset(map(first.__add__, act))
            states.append(
                State(
                    index=first + n,
                    query=qi,
                    var=var,
                    predicate=pidx,
                    activation=act,
                    start=start,
                    accepting=n in final,
                )
            )
        budget = w.budget
        queries.append(
            QueryNfa(
                qi,
                q.name,
                first,
                len(w.leaves),
                q.skip_past_last_row,
                nullable=START in final,
                window=q.window,
                order_field=q.order_field,
                start_seq=q.start_seq,
            )
        )
    preds = tuple(Predicate(i, e) for e, i in sorted(predicates.items(), key=lambda kv: kv[1]))
    return Nfa(preds, tuple(states), tuple(queries), program)
