"""Tuple generation: schema- and predicate-aware background traffic plus planted instances.

Pure numpy, no Spark: :class:`Generator` is built once on the driver from a compiled query
file and the :class:`Options`, then shipped to the Spark tasks, each of which calls
:meth:`Generator.block` for the blocks it owns.

Determinism: the stream is cut into fixed blocks of ``block_tuples`` tuples (a parameter of
the content, recorded in the manifest, never derived from the number of Spark tasks). Block
*b* draws its background from ``SeedSequence(seed, spawn_key=(0, b))`` and its planted
instances from ``SeedSequence(seed, spawn_key=(1, b))``; the templates come from
``spawn_key=(2,)``. So a seed gives the same tuples whichever task computes which block, for a
given numpy version (numpy keeps bit streams stable within a version, not across all).

Background, per field (:class:`FieldSpec`):

- the partition key: one of ``keys`` values, Zipf-skewed (rank r drawn with weight
  ``1/(r+1)**zipf``), ranks scattered over the values;
- ORDER BY fields: non-decreasing in ``seq`` (so every ORDER BY holds); one a window
  (``WITHIN n``) measures is ``base + seq`` when it can hold a value per tuple, so a span of
  positions is a span of time;
- integer and FLOAT32 fields compared with constants: uniform over a range spanning the
  constants (so each comparison is true at a moderate rate), plus, at a fixed rate, exactly a
  constant or its neighbours (boundaries are where decoders go wrong);
- integer fields compared with each other (``price + 300 < open``): a shared base plus
  per-field offsets as wide as the comparison's constant, and at a fixed rate exactly on the
  boundary (``price = open - 301 … - 299``);
- ENUM: labels by weight (uniform unless given); BOOL: true at 25%; anything else uniform over
  a small window of its type.

Planted instances: per query, a small library of concrete tuple sequences (templates) drawn
from the pattern (a word of pattern variables, each filled with a background tuple that
satisfies the variable's predicate) and checked with the reference matcher: ``short``
(near-minimal repetitions), ``long`` (long repetitions, laid out with wide gaps so one
instance spans hundreds to thousands of stream positions), ``overlap`` (two matches whose
runs overlap; every-end queries only) and ``repeat`` (two instances back to back). Each block
places some of them, on keys no other planted instance uses over the same span, and moves
background tuples of that key out of the span, so each planted run is contiguous in its
partition's sub-stream. For a query with a window (long ones laid out without gaps when gaps
would stretch them past it):

- ``window_fit`` / ``window_miss``: pairs of templates of 2 to ``n`` tuples that match with
  their first and last tuples ``n - 1`` apart and do not ``n`` apart (interior tuples in the
  same places), checked with the reference matcher. Each block places up to two of each kind
  per windowed query, after the others, at positions no other instance uses and never moved
  (so, at one ORDER BY unit per position, exactly ``n - 1`` or ``n`` apart), on a key no other
  instance uses over the span, with a key left free for the background moved out of every
  span. For an every-end query a fit's last tuple is a match, and a miss's is not: a run of
  its key ending there starts at or before its first tuple (``n`` or more before) or inside
  it (which the check rules out). They cannot be planted (``unplanted`` says why) without
  other keys to move the background to, when the field cannot hold a value per tuple, for
  ``WITHIN 1``, or when ``n + 1`` tuples exceed a block or the stream.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nfacep.errors import UsageError
from nfacep.io.tuples import Tuples
from nfacep.lang import ast
from nfacep.lang import predicates as P
from nfacep.lang.types import BoolType, EnumType, Float32Type, IntType, UIntType
from nfacep.nfa import Nfa
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference
from nfacep.settings import ParamValues

from . import BLOCK_TUPLES

__all__ = ["BLOCK_TUPLES", "KINDS", "WINDOW_KINDS", "FieldSpec", "Generator", "Options", "Planted"]

#: Kinds of planted instance.
KINDS = ("short", "long", "overlap", "repeat")
#: Kinds planted for queries with a window (WITHIN n): first and last tuples n - 1 apart in the
#: ORDER BY field (a match at the last) and n apart (no match there).
WINDOW_KINDS = ("window_fit", "window_miss")
_WINDOW_WANT = 3  #: fit/miss template pairs per windowed query
_WINDOW_PER_BLOCK = 2  #: instances of each window kind per windowed query and block
_KIND_WEIGHT = {"short": 0.45, "long": 0.2, "overlap": 0.2, "repeat": 0.15}
_KIND_WANT = {"short": 6, "long": 4, "overlap": 4, "repeat": 3}
_KIND_GAP = {"short": 4, "long": 48, "overlap": 4, "repeat": 4}
_MAX_WORD = 400
_SAFE = 1 << 62  # generated integers stay inside int64 with room for offsets
_P_POINT = 0.3  # rate of exact constants / neighbours for compared fields
_P_PAIR = 0.1  # rate of exact boundaries for field-to-field comparisons
_P_TRUE = 0.25
_DEFAULT_WINDOW = 1000


@dataclass(frozen=True)
class Options:
    """What to generate; every field is part of the content (and of the manifest)."""

    tuples: int
    seed: int = 0
    keys: int = 1  #: distinct partition keys (1 when the query has no PARTITION)
    zipf: float = 1.0  #: Zipf exponent of the key ranks; 0 = uniform
    plant_rate: float = 0.02  #: share of tuples that belong to planted instances
    block_tuples: int = BLOCK_TUPLES
    #: ENUM weights: (field, ((label, weight), …)) pairs, unlisted labels weigh 0
    enum_weights: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()


@dataclass
class FieldSpec:
    """How one field's background values are drawn (see the module docstring)."""

    name: str
    type: object
    role: str  #: key, order, int, linked, float, bool, enum
    lo: float = 0  #: uniform range (integers: inclusive)
    hi: float = 0
    points: np.ndarray | None = None  #: constants and their neighbours
    weights: np.ndarray | None = None  #: ENUM label weights (sum 1)
    group: int | None = None  #: linked group index

    def describe(self) -> dict:
        d: dict = {"field": self.name, "type": str(self.type), "generator": self.role}
        if self.role in ("int", "float"):
            d["range"] = [_py(self.lo), _py(self.hi)]
            if self.points is not None:
                d["points"] = [_py(v) for v in self.points]
                d["point_rate"] = _P_POINT
        elif self.role == "enum":
            d["weights"] = {
                label: round(float(w), 6)
                for label, w in zip(self.type.labels, self.weights, strict=True)
            }
        elif self.role == "bool":
            d["true_rate"] = _P_TRUE
        elif self.role == "linked":
            d["group"] = self.group
        return d


@dataclass
class _Group:
    fields: list[str]
    base_lo: int
    base_hi: int
    width: int
    pairs: list[tuple[str, str, int]]  #: x - y = t on the boundary


@dataclass
class _Template:
    query: int
    kind: str
    rows: dict[str, np.ndarray]
    n: int
    #: window kinds: each tuple's position (and ORDER BY value) after the first's
    offs: np.ndarray | None = None


@dataclass(frozen=True)
class Planted:
    """One planted instance: where it ends, its query, kind and key (text or None), and where
    it starts."""

    seq: int
    query: str
    kind: str
    partition: str | None
    first: int | None = None


@dataclass
class _Instance:
    query: int
    kind: str
    template: int
    pos: np.ndarray = field(repr=False)  #: positions within the block
    key: int = 0  #: key rank


def _py(v):
    return float(v) if isinstance(v, float | np.floating) else int(v)


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def _safe_range(ty) -> tuple[int, int]:
    lo, hi = ty.range
    return max(lo, -_SAFE), min(hi, _SAFE)


def _linear(e: P.PExpr) -> tuple[dict[str, int], int]:
    match e:
        case P.FieldRef(name):
            return {name: 1}, 0
        case P.Const(value):
            return {}, int(value)
        case P.Arith("neg", left):
            c, k = _linear(left)
            return {f: -v for f, v in c.items()}, -k
        case P.Arith(op, left, right):
            lc, lk = _linear(left)
            rc, rk = _linear(right)
            sign = 1 if op == "+" else -1
            out = dict(lc)
            for f, v in rc.items():
                out[f] = out.get(f, 0) + sign * v
            return out, lk + sign * rk
    raise TypeError(e)


def _comparisons(e: P.PExpr):
    match e:
        case P.Cmp():
            yield e
        case P.And(items) | P.Or(items):
            for i in items:
                yield from _comparisons(i)
        case P.Not(operand):
            yield from _comparisons(operand)


class _Find:
    """Union-find over field names (fields compared with each other)."""

    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)


@dataclass
class _Comparisons:
    """What the predicates compare each field with.

    ``points``: the constants a field is compared with (where a comparison is true or false by
    one unit, so the generator hits the boundary). Fields compared with each other are
    ``linked``, in groups (``finder``) as wide as the comparisons' constants (``widths``, by
    group root); ``pairs`` holds ``(x, y, c)`` for each comparison of ``x - y`` with ``c``.
    """

    points: dict[str, set] = field(default_factory=dict)
    finder: _Find = field(default_factory=lambda: _Find())
    widths: dict[str, int] = field(default_factory=dict)
    pairs: list[tuple[str, str, int]] = field(default_factory=list)
    linked: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, nfa: Nfa) -> _Comparisons:
        found = cls()
        for pred in nfa.predicates:
            for c in _comparisons(pred.expr):
                if c.kind == "int":
                    found._integer(c)
                elif c.kind == "float":
                    for a, b in ((c.left, c.right), (c.right, c.left)):
                        if isinstance(a, P.FieldRef) and isinstance(b, P.Const):
                            found.points.setdefault(a.name, set()).add(float(b.value))
        return found

    def _integer(self, c) -> None:
        """An integer comparison, as ``sum(coef * field) + const`` against 0."""
        lc, lk = _linear(c.left)
        rc, rk = _linear(c.right)
        coefs = dict(lc)
        for f, v in rc.items():
            coefs[f] = coefs.get(f, 0) - v
        coefs = {f: v for f, v in coefs.items() if v}
        const = lk - rk
        if len(coefs) == 1:
            ((f, v),) = coefs.items()
            if v in (1, -1):
                self.points.setdefault(f, set()).add(-const * v)
        elif len(coefs) >= 2:
            names = sorted(coefs)
            for other in names[1:]:
                self.finder.union(names[0], other)
            self.linked.update(names)
            root = self.finder.find(names[0])
            self.widths[root] = max(self.widths.get(root, 1), abs(const))
            if len(coefs) == 2 and sorted(coefs.values()) == [-1, 1]:
                x = next(f for f, v in coefs.items() if v == 1)
                y = next(f for f, v in coefs.items() if v == -1)
                self.pairs.append((x, y, -const))


def _float_spec(name: str, ty, pts: list) -> FieldSpec:
    """Uniform over a range spanning the constants, plus each constant and its neighbours."""
    if not pts:
        return FieldSpec(name, ty, "float", 0.0, 100.0)
    lo, hi, w = _spread(pts)
    w = max(w, 1.0)
    near = []
    for p in pts:
        v = np.float32(p)
        near += [np.nextafter(v, np.float32(-np.inf)), v, np.nextafter(v, np.float32(np.inf))]
    return FieldSpec(name, ty, "float", lo - w, hi + w, np.unique(np.array(near, dtype=np.float32)))


def _int_spec(name: str, ty, pts: list) -> FieldSpec:
    """Uniform over a range spanning the constants (inside the type), plus each constant and
    its neighbours; a window of the type without constants."""
    tlo, thi = _safe_range(ty)
    if not pts:
        lo, hi = _window(tlo, thi, _DEFAULT_WINDOW)
        return FieldSpec(name, ty, "int", lo, hi)
    lo, hi, w = _spread(pts)
    w = max(int(w), 16)
    near = sorted({p + d for p in pts for d in (-1, 0, 1) if tlo <= p + d <= thi})
    rlo, rhi = max(tlo, int(lo) - w), min(thi, int(hi) + w)
    if rlo > rhi:  # constants outside the field's range (e.g. `a - 300 > 0`)
        rlo, rhi = _window(tlo, thi, _DEFAULT_WINDOW)
    return FieldSpec(name, ty, "int", rlo, rhi, np.array(near, dtype=np.int64) if near else None)


def _linked_groups(specs: list[FieldSpec], found: _Comparisons) -> list[_Group]:
    """The groups of linked fields: a shared base plus offsets as wide as the comparisons'
    constants; sets each linked spec's ``group``."""
    groups: dict[str, _Group] = {}
    for s in specs:
        if s.role != "linked":
            continue
        root = found.finder.find(s.name)
        if root not in groups:
            width = max(1, found.widths.get(root, 1))
            members = sorted(n for n in found.linked if found.finder.find(n) == root)
            tlo, thi = _safe_range(s.type)
            pts = sorted(p for m in members for p in found.points.get(m, ()) if tlo <= p <= thi)
            if pts:
                lo, hi, w = _spread(pts)
                blo, bhi = lo - max(int(w), 16), hi + max(int(w), 16)
            elif tlo >= 0:
                blo, bhi = tlo + 8 * width, tlo + 8 * width + max(_DEFAULT_WINDOW, 16 * width)
            else:
                blo, bhi = -8 * width, 8 * width
            gpairs = [p for p in found.pairs if p[0] in members]
            half = _SAFE // 2
            blo, bhi = min(max(int(blo), -half), half), min(max(int(bhi), -half), half)
            groups[root] = _Group(members, blo, max(blo, bhi), min(width, half), gpairs)
        s.group = list(groups).index(root)
    return list(groups.values())


def _spread(points: list[int | float]) -> tuple[float, float, float]:
    lo, hi = min(points), max(points)
    w = max((hi - lo) / 2, max(abs(p) for p in points) / 4)
    return lo, hi, w


class Generator:
    """Everything needed to generate any block of the stream (picklable, no Spark)."""

    def __init__(self, nfa: Nfa, options: Options, values: ParamValues | None = None):
        self.options = options
        #: the runtime parameters' values (the engine's after a reset), as the predicates
        #: read them: one value each
        self.values = values
        self._params = values.columns(1) if values else {}
        if values:  # what the predicates compare with: the parameters' values, as constants
            nfa = dataclasses.replace(
                nfa,
                predicates=tuple(
                    dataclasses.replace(p, expr=P.bind(p.expr, values.initial))
                    for p in nfa.predicates
                ),
            )
        self.program = nfa.program
        self.schema = nfa.program.schema
        self.n = options.tuples
        self.key_field = self.program.partition_field
        self.order_fields = tuple(self.program.order_fields)
        if self.key_field in self.order_fields:
            raise UsageError(
                f"the partition key '{self.key_field}' is also an ORDER BY field: "
                "cannot generate a stream that is both skewed and ordered by it"
            )
        self.keys = options.keys if self.key_field else 1
        #: ORDER BY fields a window measures: one unit per tuple (ts = base + seq) when the
        #: field can hold it, so a span of positions is a span of time
        self.unit_fields = self._unit_fields()
        self._derive_specs(nfa)
        self._derive_keys()
        self.templates: list[list[_Template]] = []  # per query
        self.window_templates: list[list[_Template]] = []  # per query: WINDOW_KINDS
        self.unplanted: dict[str, str] = {}  # query -> why it has no templates (of some kinds)
        self._nfa = nfa
        self._build_templates()
        self._build_window_templates()
        self._nfa = None  # workers compile their own; keep the pickle small

    # --- field specifications ---------------------------------------------------------------

    def _derive_specs(self, nfa: Nfa) -> None:
        """Each field's generator, from what the predicates compare it with."""
        found = _Comparisons.of(nfa)
        weights = dict(self.options.enum_weights)
        self.specs = [self._field_spec(f, found, weights) for f in self.schema.fields]
        self.groups = _linked_groups(self.specs, found)

    def _field_spec(self, f, found: _Comparisons, weights: dict) -> FieldSpec:
        ty = f.type
        if f.name == self.key_field:
            return FieldSpec(f.name, ty, "key")
        if f.name in self.order_fields:
            return FieldSpec(f.name, ty, "order")
        if isinstance(ty, EnumType):
            w = np.ones(len(ty.labels))
            if f.name in weights:
                given = dict(weights[f.name])
                w = np.array([given.get(label, 0.0) for label in ty.labels], dtype=float)
            return FieldSpec(f.name, ty, "enum", weights=w / w.sum())
        if isinstance(ty, BoolType):
            return FieldSpec(f.name, ty, "bool")
        pts = sorted(found.points.get(f.name, ()))
        if isinstance(ty, Float32Type):
            return _float_spec(f.name, ty, pts)
        if f.name in found.linked:
            return FieldSpec(f.name, ty, "linked")
        return _int_spec(f.name, ty, pts)

    def _derive_keys(self) -> None:
        if self.key_field is None:
            self.key_values = None
            self.key_cdf = None
            return
        ty = self.schema.field(self.key_field).type
        p = self.keys
        if isinstance(ty, EnumType | BoolType):
            domain = len(ty.labels) if isinstance(ty, EnumType) else 2
            if p > domain:
                raise UsageError(
                    f"--keys {p}: the partition key '{self.key_field}' {ty} has only "
                    f"{domain} values"
                )
            values = np.arange(domain, dtype=np.int64)
        else:
            lo, hi = ty.range
            if p > hi - lo + 1:
                raise UsageError(
                    f"--keys {p}: the partition key '{self.key_field}' {ty} has only "
                    f"{hi - lo + 1} values"
                )
            start = 1 if lo <= 1 and 1 + p - 1 <= hi else lo
            values = np.arange(p, dtype=np.int64) + start
        perm = _rng(self.options.seed, 3).permutation(len(values))
        self.key_values = values[perm][:p]
        w = 1.0 / np.power(np.arange(1, p + 1, dtype=np.float64), self.options.zipf)
        cdf = np.cumsum(w)
        self.key_cdf = cdf / cdf[-1]

    def describe(self) -> list[dict]:
        out = []
        for s in self.specs:
            d = s.describe()
            if s.role == "key":
                d.update(keys=self.keys, zipf=self.options.zipf)
            elif s.role == "order" and s.name in self.unit_fields:
                d.update(step=1)  # a window measures it: one unit per tuple
            elif s.role == "linked":
                g = self.groups[s.group]
                d.update(
                    fields=g.fields,
                    base_range=[g.base_lo, g.base_hi],
                    offset_width=g.width,
                    boundary_rate=_P_PAIR,
                    boundaries=[f"{x} - {y} = {t}" for x, y, t in g.pairs],
                )
            out.append(d)
        return out

    # --- background -------------------------------------------------------------------------

    def _key_ranks(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.key_cdf is None:
            return np.zeros(n, dtype=np.int64)
        r = np.searchsorted(self.key_cdf, rng.random(n), side="right")
        return np.minimum(r, self.keys - 1).astype(np.int64)

    def _unit_fields(self) -> frozenset[str]:
        """The ORDER BY fields of windowed queries that can hold one value per tuple."""
        out = set()
        for q in self.program.queries:
            if q.window is None:
                continue
            lo, hi = _safe_range(self.schema.field(q.order_field).type)
            base = 0 if lo <= 0 <= hi else lo
            if max(self.n - 1, 1) <= hi - base:
                out.add(q.order_field)
        return frozenset(out)

    def _order_values(self, spec: FieldSpec, seqs: np.ndarray) -> np.ndarray:
        if isinstance(spec.type, Float32Type):
            return seqs.astype(np.float32)
        lo, hi = _safe_range(spec.type)
        base = 0 if lo <= 0 <= hi else lo
        span = hi - base
        last = max(self.n - 1, 1)
        if spec.name in self.unit_fields:
            return base + seqs
        if last <= span:
            step = max(1, min(span // last, 10))
            return base + seqs * step
        return base + (seqs * span) // last

    def background(
        self, rng: np.random.Generator, seqs: np.ndarray, focus: bool = False
    ) -> dict[str, np.ndarray]:
        """Background columns for the tuples ``seqs``; the key column holds key *ranks*.

        ``focus`` draws compared fields from their constants more often (for templates whose
        predicates the plain background rarely satisfies).
        """
        n = len(seqs)
        p_point = 0.9 if focus else _P_POINT
        cols: dict[str, np.ndarray] = {}
        for s in self.specs:
            if s.role == "key":
                cols[s.name] = self._key_ranks(rng, n)
            elif s.role == "order":
                cols[s.name] = self._order_values(s, seqs)
            elif s.role == "enum":
                cdf = np.cumsum(s.weights)
                idx = np.searchsorted(cdf / cdf[-1], rng.random(n), side="right")
                cols[s.name] = np.minimum(idx, len(s.weights) - 1).astype(np.int64)
            elif s.role == "bool":
                cols[s.name] = rng.random(n) < (0.5 if focus else _P_TRUE)
            elif s.role == "float":
                v = rng.uniform(s.lo, s.hi, n).astype(np.float32)
                if s.points is not None:
                    hit = rng.random(n) < p_point
                    v = np.where(hit, rng.choice(s.points, n), v)
                cols[s.name] = v
            elif s.role == "int":
                v = rng.integers(int(s.lo), int(s.hi), n, endpoint=True, dtype=np.int64)
                if s.points is not None:
                    hit = rng.random(n) < p_point
                    v = np.where(hit, rng.choice(s.points, n), v)
                cols[s.name] = v
        for g in self.groups:
            base = rng.integers(g.base_lo, g.base_hi, n, endpoint=True, dtype=np.int64)
            for name in g.fields:
                cols[name] = base + rng.integers(
                    -g.width, g.width, n, endpoint=True, dtype=np.int64
                )
            for x, y, t in g.pairs:
                hit = rng.random(n) < (0.5 if focus else _P_PAIR)
                delta = rng.integers(-1, 1, n, endpoint=True, dtype=np.int64)
                cols[x] = np.where(hit, cols[y] + t + delta, cols[x])
            for name in g.fields:
                lo, hi = _safe_range(self.schema.field(name).type)
                cols[name] = np.clip(cols[name], lo, hi)
        return cols

    # --- templates (planted instances) ------------------------------------------------------

    def _word(self, p: ast.Pattern, rng: np.random.Generator, long: bool) -> list[str]:
        match p:
            case ast.Var(name):
                return [name]
            case ast.Wildcard():
                return ["."]
            case ast.Empty():
                return []
            case ast.Seq(items):
                return [v for i in items for v in self._word(i, rng, long)]
            case ast.Alt(items):
                return self._word(items[int(rng.integers(len(items)))], rng, long)
            case ast.Permute(items):
                order = rng.permutation(len(items))
                return [v for i in order for v in self._word(items[int(i)], rng, long)]
            case ast.Repeat(child, lo, hi):
                if long:
                    k = lo + int(rng.integers(6, 30))
                    k = k if hi is None else int(rng.integers(max(lo, (lo + hi) // 2), hi + 1))
                else:
                    k = lo + int(rng.integers(0, 3))
                    k = k if hi is None else min(k, hi)
                return [v for _ in range(k) for v in self._word(child, rng, long)]
        raise TypeError(p)

    def _pool(self, q, var: str, rng: np.random.Generator, pools: dict):
        """Up to 256 background tuples satisfying ``var``'s predicate, or None."""
        key = (q.name, var)
        if key in pools:
            return pools[key]
        pred = None if var == "." else q.predicates.get(var)
        found = None
        for attempt in range(6):
            cols = self.background(rng, np.arange(4096, dtype=np.int64), focus=attempt >= 2)
            if pred is None:
                ok = np.arange(256)
            else:
                ok = np.flatnonzero(P.evaluate(pred, {**self._typed(cols), **self._params}, 4096))[
                    :256
                ]
            if len(ok):
                found = {k: v[ok] for k, v in cols.items()}
                break
        pools[key] = found
        return found

    def _fill(self, q, word: list[str], rng, pools) -> dict[str, np.ndarray] | None:
        parts: dict[str, list] = {s.name: [] for s in self.specs}
        for var in word:
            pool = self._pool(q, var, rng, pools)
            if pool is None:
                return None
            i = int(rng.integers(len(pool[self.specs[0].name])))
            for k, v in pool.items():
                parts[k].append(v[i])
        return {k: np.array(v, dtype=self._dtype(k)) for k, v in parts.items()}

    def _dtype(self, name: str):
        s = next(s for s in self.specs if s.name == name)
        if isinstance(s.type, Float32Type):
            return np.float32
        if isinstance(s.type, BoolType):
            return bool
        return np.int64

    def _typed(self, cols: dict[str, np.ndarray], key_rank: bool = True) -> dict:
        """Columns as the reference matcher types them (UINT as uint64, keys as values)."""
        out = {}
        for s in self.specs:
            v = cols[s.name]
            if s.role == "key" and key_rank:
                v = self.key_values[v] if self.key_values is not None else v
            if isinstance(s.type, BoolType):
                v = v.astype(bool)
            elif isinstance(s.type, UIntType):
                v = v.astype(np.uint64)
            out[s.name] = v
        return out

    def _ends(
        self, rows: dict[str, np.ndarray], qi: int, offs: np.ndarray | None = None
    ) -> np.ndarray:
        """Where query ``qi`` reports matches on ``rows`` alone (one key); ORDER BY values as
        at positions ``0 … n-1`` of the stream, or ``base + offs`` when given."""
        n = len(next(iter(rows.values())))
        cols = dict(rows)
        seqs = np.arange(n, dtype=np.int64)
        for s in self.specs:
            if s.role == "order":
                cols[s.name] = (
                    self._order_values(s, seqs)
                    if offs is None
                    else self._order_values(s, np.zeros(1, dtype=np.int64)) + offs
                )
            elif s.role == "key":
                cols[s.name] = np.zeros(n, dtype=np.int64)
        result = reference.run(
            self._nfa, Tuples(self._typed(cols), n), EngineParams(partitions=1), values=self.values
        )
        return result.seqs[result.queries == qi]

    def _check(self, kind: str, rows, qi: int) -> bool:
        n = len(next(iter(rows.values())))
        ends = self._ends(rows, qi)
        if len(ends) == 0 or ends[-1] != n - 1:
            return False
        if kind in ("short", "long"):
            return True
        if len(ends) < 2:
            return False
        if kind == "repeat":
            return True
        # overlap: no run ending at the last tuple starts after the latest earlier match end
        e1 = int(ends[-2])
        cut = {k: v[e1 + 1 :] for k, v in rows.items()}
        later = self._ends(cut, qi)
        return len(later) == 0 or later[-1] != n - e1 - 2

    def _build_templates(self) -> None:
        rng = _rng(self.options.seed, 2)
        pools: dict = {}
        for qi, q in enumerate(self.program.queries):
            lib: list[_Template] = []
            for kind in KINDS:
                if kind == "overlap" and q.skip_past_last_row:
                    continue
                found = 0
                for _ in range(40):
                    rows = self._candidate(q, kind, rng, pools)
                    if rows is None or not self._check(kind, rows, qi):
                        continue
                    lib.append(_Template(qi, kind, rows, len(rows[self.specs[0].name])))
                    found += 1
                    if found == _KIND_WANT[kind]:
                        break
            if not lib:
                never = sorted(
                    v for (name, v), pool in pools.items() if name == q.name and pool is None
                )
                why = "nothing planted: " + (
                    f"no generated tuple satisfies {', '.join(never)}"
                    if never
                    else "no sequence of generated tuples drawn from its pattern matched"
                )
                self.unplanted[q.name] = why
            self.templates.append(lib)

    def _candidate(self, q, kind: str, rng, pools):
        for _ in range(8):
            word = self._word(q.pattern, rng, long=kind == "long")
            if 0 < len(word) <= _MAX_WORD:
                break
        else:
            return None
        rows = self._fill(q, word, rng, pools)
        if rows is None or kind in ("short", "long"):
            return rows
        if kind == "repeat":
            word2 = self._word(q.pattern, rng, long=False)
            more = self._fill(q, word2, rng, pools) if word2 else None
        elif rng.random() < 0.5 or len(word) < 2:
            # repeat the last tuple (a second end of a trailing repetition)
            more = {k: v[-1:] for k, v in rows.items()}
        else:
            # pump a suffix of the word
            k = int(rng.integers(1, len(word)))
            more = self._fill(q, word[k:], rng, pools)
        if more is None:
            return None
        return {k: np.concatenate([rows[k], more[k]]) for k in rows}

    def _build_window_templates(self) -> None:
        """Per windowed query, pairs of templates at the window's edge: the same tuples with the
        first and last ``n - 1`` apart (``window_fit``: a match at the last) and ``n`` apart
        (``window_miss``: none there), each checked with the reference matcher; the interior
        tuples keep their places. Why a query gets none goes to ``unplanted``."""
        rng = _rng(self.options.seed, 5)
        pools: dict = {}
        room = min(self.options.block_tuples, self.n)
        for qi, q in enumerate(self.program.queries):
            lib: list[_Template] = []
            self.window_templates.append(lib)
            n = q.window
            if n is None:
                continue
            why = self._window_unplantable(q, room)
            if why is None:
                for _ in range(60):
                    pair = self._window_pair(q, qi, n, rng, pools)
                    if pair is not None:
                        lib.extend(pair)
                        if len(lib) == 2 * _WINDOW_WANT:
                            break
                if not lib:
                    why = (
                        f"no sequence of generated tuples drawn from its pattern (2 to {n} "
                        f"tuples) matches with its first and last {n - 1} apart and not "
                        f"{n} apart"
                    )
            if why is not None:
                why = f"no {' or '.join(WINDOW_KINDS)} instances: {why}"
                old = self.unplanted.get(q.name)
                self.unplanted[q.name] = why if old is None else f"{old}; {why}"

    def _window_unplantable(self, q, room: int) -> str | None:
        """Why query ``q``'s window edges cannot be planted, or None."""
        n = q.window
        if not self.interleaved:
            return (
                "one sub-stream (no PARTITION, or --keys 1): the tuples between an "
                "instance's first and last cannot be moved to another key"
            )
        if q.order_field not in self.unit_fields:
            f = self.schema.field(q.order_field)
            return (
                f"the ORDER BY field {f.name} {f.type} cannot give each of the "
                f"{self.n} tuples its own value"
            )
        if n < 2:
            return "WITHIN 1 only holds runs of one tuple, whose first and last are the same tuple"
        if n + 1 > room:
            where = (
                "the stream"
                if self.n <= self.options.block_tuples
                else f"a block (--block-tuples {self.options.block_tuples})"
            )
            return (
                f"WITHIN {n}: an instance spans up to {n + 1} consecutive tuples, more than "
                f"{where} holds ({room})"
            )
        return None

    def _window_pair(self, q, qi: int, n: int, rng, pools) -> list[_Template] | None:
        for _ in range(8):
            word = self._word(q.pattern, rng, long=False)
            if 2 <= len(word) <= min(n, _MAX_WORD):
                break
        else:
            return None
        rows = self._fill(q, word, rng, pools)
        if rows is None:
            return None
        size = len(word)
        inner = (
            np.sort(rng.choice(n - 2, size - 2, replace=False)) + 1
            if size > 2
            else np.zeros(0, dtype=np.int64)
        )
        fit = np.concatenate([[0], inner, [n - 1]]).astype(np.int64)
        miss = np.concatenate([[0], inner, [n]]).astype(np.int64)
        ends = self._ends(rows, qi, fit)
        if len(ends) == 0 or ends[-1] != size - 1:
            return None
        ends = self._ends(rows, qi, miss)
        if len(ends) and ends[-1] == size - 1:
            return None
        return [
            _Template(qi, "window_fit", rows, size, fit),
            _Template(qi, "window_miss", rows, size, miss),
        ]

    # --- blocks -----------------------------------------------------------------------------

    @property
    def n_blocks(self) -> int:
        return max(1, math.ceil(self.n / self.options.block_tuples))

    def bounds(self, b: int) -> tuple[int, int]:
        start = b * self.options.block_tuples
        return start, min(self.n, start + self.options.block_tuples)

    @property
    def interleaved(self) -> bool:
        """Planted instances interleave with other keys (else they are contiguous runs)."""
        return self.key_field is not None and self.keys > 1

    def _plan(self, b: int) -> list[_Instance]:
        start, stop = self.bounds(b)
        length = stop - start
        rng = _rng(self.options.seed, 1, b)
        inst = self._plan_kinds(b, length, rng)
        if self.interleaved and length and self.options.plant_rate and any(self.window_templates):
            inst = self._plan_windows(inst, length, rng)
        return inst

    def _plan_kinds(self, b: int, length: int, rng) -> list[_Instance]:
        """The instances of KINDS block ``b`` plants."""
        queries = [qi for qi, lib in enumerate(self.templates) if lib]
        if not queries or length == 0 or self.options.plant_rate == 0:
            return []
        lens = [t.n for lib in self.templates for t in lib]
        mean = sum(lens) / len(lens)
        want = max(len(queries), round(self.options.plant_rate * length / mean))
        budget = length // 2
        inst: list[_Instance] = []
        for i in range(want):
            qi = queries[(b + i) % len(queries)]
            lib = self.templates[qi]
            kinds = sorted({t.kind for t in lib}, key=KINDS.index)
            w = np.array([_KIND_WEIGHT[k] for k in kinds])
            kind = kinds[int(rng.choice(len(kinds), p=w / w.sum()))]
            choices = [j for j, t in enumerate(lib) if t.kind == kind and t.n <= budget]
            if not choices:
                continue
            j = choices[int(rng.integers(len(choices)))]
            n = lib[j].n
            budget -= n
            if self.interleaved:
                gaps = rng.integers(1, _KIND_GAP[kind], n - 1, endpoint=True)
                offs = np.concatenate([[0], np.cumsum(gaps)]).astype(np.int64)
                window = self.program.queries[qi].window
                if offs[-1] >= length or (window is not None and offs[-1] >= window):
                    offs = np.arange(n, dtype=np.int64)  # (gaps would break the window)
            else:
                offs = np.arange(n, dtype=np.int64)
            first = int(rng.integers(0, length - int(offs[-1])))
            inst.append(_Instance(qi, kind, j, first + offs))
        if not inst:
            return []
        if self.interleaved:
            _spread_positions(inst, length)
            return self._assign_keys(inst, rng)
        # contiguous runs, one after the other
        inst.sort(key=lambda x: int(x.pos[0]))
        kept, end = [], -1
        for x in inst:
            shift = max(0, end + 1 - int(x.pos[0]))
            pos = x.pos + shift
            if pos[-1] >= length:
                continue
            x.pos, end = pos, int(pos[-1])
            kept.append(x)
        return kept

    def _plan_windows(self, inst: list[_Instance], length: int, rng) -> list[_Instance]:
        """Add window edge instances (after the others, on positions none of them uses, never
        moved, so the first and last stay exactly ``n - 1`` or ``n`` apart), each on a key no
        other instance uses over its span, leaving a key free for the background of every span
        it overlaps. Sorted by first position."""
        used = np.zeros(length, dtype=bool)
        for x in inst:
            used[x.pos] = True
        out = list(inst)
        for qi, lib in enumerate(self.window_templates):
            for kind in WINDOW_KINDS:
                choices = [j for j, t in enumerate(lib) if t.kind == kind and t.offs[-1] < length]
                if not choices:
                    continue
                for _ in range(_WINDOW_PER_BLOCK):
                    j = choices[int(rng.integers(len(choices)))]
                    offs = lib[j].offs
                    for _ in range(8):
                        pos = int(rng.integers(0, length - int(offs[-1]))) + offs
                        if used[pos].any():
                            continue
                        key = self._free_key(out, int(pos[0]), int(pos[-1]), rng)
                        if key is None:
                            continue
                        out.append(_Instance(qi, kind, j, pos, key))
                        used[pos] = True
                        break
        out.sort(key=lambda x: int(x.pos[0]))
        return out

    def _free_key(self, inst: list[_Instance], s: int, e: int, rng) -> int | None:
        """A key for an instance spanning ``s … e``: none of ``inst`` overlapping it uses it,
        and over its span and theirs some key stays free (where background tuples of an
        instance's key go, :meth:`_clear_spans`)."""

        def over(a: int, z: int) -> list[_Instance]:
            return [y for y in inst if int(y.pos[0]) <= z and int(y.pos[-1]) >= a]

        near = over(s, e)
        busy = [{y.key for y in near}]
        busy += [{y.key for y in over(int(x.pos[0]), int(x.pos[-1]))} for x in near]
        r = int(self._key_ranks(rng, 1)[0])
        for _ in range(self.keys):
            if r not in busy[0] and all(len(k | {r}) < self.keys for k in busy):
                return r
            r = (r + 1) % self.keys
        return None

    def _assign_keys(self, inst: list[_Instance], rng) -> list[_Instance]:
        inst.sort(key=lambda x: int(x.pos[0]))
        ranks = self._key_ranks(rng, len(inst))
        kept: list[_Instance] = []
        active: list[tuple[int, int]] = []  # (end, key) of kept instances
        for x, r in zip(inst, ranks.tolist(), strict=True):
            s = int(x.pos[0])
            active = [a for a in active if a[0] >= s]
            taken = {k for _, k in active}
            if len(taken) >= self.keys - 1:
                continue  # keep a key free for the background around it
            while r in taken:
                r = (r + 1) % self.keys
            x.key = r
            active.append((int(x.pos[-1]), r))
            kept.append(x)
        return kept

    def planted(self, b: int) -> list[Planted]:
        """The instances block ``b`` plants (replays its plan only, no background)."""
        start, _ = self.bounds(b)
        out = []
        for x in self._plan(b):
            part = None
            if self.key_field is not None:
                part = self._key_text(int(self.key_values[x.key]))
            out.append(
                Planted(
                    start + int(x.pos[-1]),
                    self.program.queries[x.query].name,
                    x.kind,
                    part,
                    start + int(x.pos[0]),
                )
            )
        return out

    def _key_text(self, value: int) -> str:
        from nfacep.io.tuples import format_value

        return format_value(value, self.schema.field(self.key_field).type)

    def block(self, b: int) -> dict[str, np.ndarray]:
        """Columns of block ``b`` (``seq`` first), in the generator's internal types."""
        start, stop = self.bounds(b)
        seqs = np.arange(start, stop, dtype=np.int64)
        cols = self.background(_rng(self.options.seed, 0, b), seqs)
        plan = self._plan(b)
        planted = np.zeros(len(seqs), dtype=bool)
        fixed = {s.name for s in self.specs if s.role in ("key", "order")}
        for x in plan:
            lib = self.window_templates if x.kind in WINDOW_KINDS else self.templates
            t = lib[x.query][x.template]
            for name, values in t.rows.items():
                if name not in fixed:
                    cols[name][x.pos] = values
            if self.key_field is not None:
                cols[self.key_field][x.pos] = x.key
            planted[x.pos] = True
        if self.interleaved and plan:
            self._clear_spans(cols[self.key_field], planted, plan)
        if self.key_field is not None:
            values = self.key_values[cols[self.key_field]]
            if isinstance(self.schema.field(self.key_field).type, BoolType):
                values = values.astype(bool)
            cols[self.key_field] = values
        return {"seq": seqs, **cols}

    def _clear_spans(self, keys: np.ndarray, planted: np.ndarray, plan) -> None:
        """Move background tuples of a planted key out of its instance's span."""
        starts = np.array([int(x.pos[0]) for x in plan])
        ends = np.array([int(x.pos[-1]) for x in plan])
        kk = np.array([x.key for x in plan])
        for x, s, e in zip(plan, starts.tolist(), ends.tolist(), strict=True):
            seg = keys[s : e + 1]
            bad = (seg == x.key) & ~planted[s : e + 1]
            if not bad.any():
                continue
            busy = set(kk[(starts <= e) & (ends >= s)].tolist())
            r = x.key
            for _ in range(self.keys):
                r = (r + 1) % self.keys
                if r not in busy:
                    seg[bad] = r
                    break

    # --- Arrow ------------------------------------------------------------------------------

    def arrow_schema(self) -> pa.Schema:
        fields = [pa.field("seq", pa.int64(), nullable=False)]
        for f in self.schema.fields:
            fields.append(pa.field(f.name, _arrow_type(f.type), nullable=False))
        return pa.schema(fields)

    def to_arrow(self, cols: dict[str, np.ndarray]) -> pa.RecordBatch:
        arrays = [pa.array(cols["seq"], pa.int64())]
        for f in self.schema.fields:
            v = cols[f.name]
            if isinstance(f.type, EnumType):
                arrays.append(
                    pc.take(pa.array(list(f.type.labels), pa.string()), pa.array(v, pa.int64()))
                )
            else:
                arrays.append(pa.array(v, _arrow_type(f.type)))
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema())

    def sample_rates(self, nfa: Nfa, n: int = 1 << 16) -> dict[str, float]:
        """Share of background tuples satisfying each decoder predicate."""
        cols = self.background(_rng(self.options.seed, 4), np.arange(n, dtype=np.int64))
        typed = {**self._typed(cols), **self._params}
        return {
            p.text: round(float(P.evaluate(p.expr, typed, n).mean()), 4) for p in nfa.predicates
        }


def _window(lo: int, hi: int, width: int) -> tuple[int, int]:
    if lo >= 0:
        return lo, min(hi, lo + width - 1)
    return max(lo, -width // 2), min(hi, width // 2 - 1)


def _arrow_type(ty) -> pa.DataType:
    if isinstance(ty, EnumType):
        return pa.string()
    if isinstance(ty, BoolType):
        return pa.bool_()
    if isinstance(ty, Float32Type):
        return pa.float32()
    assert isinstance(ty, UIntType | IntType)
    return pa.int64()


def _spread_positions(inst: list[_Instance], length: int) -> None:
    """Make all planted positions distinct, keeping each instance's order and the block."""
    desired = np.concatenate([x.pos for x in inst])
    owner = np.concatenate([np.full(len(x.pos), i) for i, x in enumerate(inst)])
    idx = np.concatenate([np.arange(len(x.pos)) for x in inst])
    order = np.lexsort((idx, owner, desired))
    t = np.arange(len(desired))
    actual = np.maximum.accumulate(desired[order] - t) + t
    actual = np.minimum(actual, length - len(desired) + t)
    pos = np.empty_like(actual)
    pos[order] = actual
    for i, x in enumerate(inst):
        x.pos = pos[owner == i]
