"""The background traffic of the generated stream: how each field's values are drawn, from
what the queries' predicates compare it with, and the partition keys.

Per field (:class:`FieldSpec`):

- the partition key: one of ``keys`` values, Zipf-skewed (rank r drawn with weight
  ``1/(r+1)**zipf``), ranks scattered over the values; an integer (or IPV4) key field takes
  the constants the predicates compare it with and their neighbours, then consecutive
  values from 1 (so that a condition on the key holds in the background's tuples; a
  planted instance of a query whose conditions read the key goes on a key its template was
  built for, :mod:`.templates`);
- ORDER BY fields: non-decreasing in ``seq`` (so every ORDER BY holds); one a window
  (``WITHIN n``) measures is ``base + seq`` when it can hold a value per tuple, so a span of
  positions is a span of time;
- integer and FLOAT32 fields compared with constants: uniform over a range spanning the
  constants (so each comparison is true at a moderate rate), plus, at a fixed rate, exactly a
  constant or its neighbours (boundaries are where decoders go wrong);
- integer fields compared with each other (``price + 300 < open``): a shared base plus
  per-field offsets as wide as the comparison's constant, and at a fixed rate exactly on the
  boundary (``price = open - 301 … - 299``);
- IPV4 fields are integers here (32-bit addresses): one tested against a network
  (``IN '10.0.0.0/8'``) has the network's first and last addresses as its constants; TIMESTAMP
  fields are counts of their unit, an ORDER BY one passing the TIMESTAMP constants it is
  compared with half-way through the stream;
- ENUM: labels by weight (uniform unless given); BOOL: true at 25%; anything else uniform over
  a small window of its type.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from nfacep.errors import UsageError
from nfacep.lang import predicates as P
from nfacep.lang.evaluate import evaluate
from nfacep.lang.predicates import known_of, prev_of
from nfacep.lang.types import BoolType, EnumType, Float32Type, UIntType
from nfacep.nfa import Nfa
from nfacep.settings import ParamValues

from . import keys

__all__ = ["Background", "FieldSpec"]

_SAFE = 1 << 62  # generated integers stay inside int64 with room for offsets
_P_POINT = 0.3  # rate of exact constants / neighbours for compared fields
_P_PAIR = 0.1  # rate of exact boundaries for field-to-field comparisons
_P_TRUE = 0.25
_DEFAULT_WINDOW = 1000


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


def _py(v):
    return float(v) if isinstance(v, float | np.floating) else int(v)


def seeded_rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def _safe_range(ty) -> tuple[int, int]:
    lo, hi = ty.range
    return max(lo, -_SAFE), min(hi, _SAFE)


def _linear(e: P.PExpr) -> tuple[dict[str, int], int]:
    """``e`` as ``sum(coef * field) + const``; ``PREV(f, k)`` counts as ``f`` (the field
    compared with its earlier values: its spread, not a constant, matters)."""
    match e:
        case P.FieldRef(name) | P.Prev(name):
            return {name: 1}, 0
        case P.Const(value):
            return {}, int(value)
        case P.Arith("neg", left):
            c, k = _linear(left)
            return {f: -v for f, v in c.items()}, -k
        case P.Arith("*", left, P.Const(value)):  # the checker puts the constant right
            c, k = _linear(left)
            return {f: v * int(value) for f, v in c.items()}, k * int(value)
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
                if c.kind == "int" or (c.kind == "ipv4" and isinstance(c.right, P.FieldRef)):
                    found._integer(c)  # IPV4 fields compared with each other: as integers
                elif c.kind == "ipv4" and isinstance(c.right, P.Const):
                    # a network's first and last addresses (their neighbours are added too)
                    first = int(c.right.value)
                    last = first + (1 << (32 - c.right.prefix)) - 1
                    found.points.setdefault(c.left.name, set()).update((first, last))
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
            # v * f + const = 0 on the boundary: f = -const / v, rounded down when not whole
            self.points.setdefault(f, set()).add(-const // v)
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
    # a key or ORDER BY field compared with another keeps its own generator, outside the group
    drawn = {s.name for s in specs if s.role == "linked"}
    for s in specs:
        if s.role != "linked":
            continue
        root = found.finder.find(s.name)
        if root not in groups:
            width = max(1, found.widths.get(root, 1))
            members = sorted(n for n in found.linked & drawn if found.finder.find(n) == root)
            tlo, thi = _safe_range(s.type)
            pts = sorted(p for m in members for p in found.points.get(m, ()) if tlo <= p <= thi)
            if pts:
                lo, hi, w = _spread(pts)
                blo, bhi = lo - max(int(w), 16), hi + max(int(w), 16)
            elif tlo >= 0:
                blo, bhi = tlo + 8 * width, tlo + 8 * width + max(_DEFAULT_WINDOW, 16 * width)
            else:
                blo, bhi = -8 * width, 8 * width
            gpairs = [p for p in found.pairs if p[0] in members and p[1] in members]
            half = _SAFE // 2
            blo, bhi = min(max(int(blo), -half), half), min(max(int(bhi), -half), half)
            groups[root] = _Group(members, blo, max(blo, bhi), min(width, half), gpairs)
        s.group = list(groups).index(root)
    return list(groups.values())


def _spread(points: list[int | float]) -> tuple[float, float, float]:
    lo, hi = min(points), max(points)
    w = max((hi - lo) / 2, max(abs(p) for p in points) / 4)
    return lo, hi, w


def _window(lo: int, hi: int, width: int) -> tuple[int, int]:
    if lo >= 0:
        return lo, min(hi, lo + width - 1)
    return max(lo, -width // 2), min(hi, width // 2 - 1)


class Background:
    """How every field's background values are drawn, and the partition keys (picklable): built
    once from the queries (``nfa``, runtime parameters bound) and the options."""

    def __init__(self, nfa: Nfa, options, values: ParamValues | None = None):
        self.options = options
        #: the runtime parameters' values (the engine's after a reset), as the predicates
        #: read them: one value each
        self.values = values
        self.params = values.columns(1) if values else {}
        self.program = nfa.program
        self.schema = nfa.program.schema
        self.n = options.tuples
        #: the partition key's fields; the first one's column holds the key *ranks* until
        #: :meth:`typed` (or the plan) turns them into every key field's values
        self.key_fields = self.program.partition_fields
        self.key_field = self.key_fields[0] if self.key_fields else None
        self.order_fields = tuple(self.program.order_fields)
        for name in self.key_fields:
            if name in self.order_fields:
                raise UsageError(
                    f"the partition key '{name}' is also an ORDER BY field: "
                    "cannot generate a stream that is both skewed and ordered by it"
                )
        self.keys = options.keys if self.key_field else 1
        #: ORDER BY fields a window measures: one unit per tuple (ts = base + seq) when the
        #: field can hold it, so a span of positions is a span of time
        self.unit_fields = self._unit_fields()
        self._derive_specs(nfa)
        self._derive_keys()

    @property
    def interleaved(self) -> bool:
        """Planted instances interleave with other keys (else they are contiguous runs)."""
        return self.key_field is not None and self.keys > 1

    def _derive_specs(self, nfa: Nfa) -> None:
        """Each field's generator, from what the predicates compare it with."""
        found = _Comparisons.of(nfa)
        #: the constants the predicates compare each key field with (a network's first and
        #: last addresses): its key values include them, so that a run a key's tuples plant
        #: can satisfy them
        self.key_points = {n: sorted(found.points.get(n, ())) for n in self.key_fields}
        weights = dict(self.options.enum_weights)
        self.specs = [self._field_spec(f, found, weights) for f in self.schema.fields]
        self.groups = _linked_groups(self.specs, found)

    def _field_spec(self, f, found: _Comparisons, weights: dict) -> FieldSpec:
        ty = f.type
        if f.name in self.key_fields:
            return FieldSpec(f.name, ty, "key")
        if f.name in self.order_fields:
            # the constants it is compared with (TIMESTAMP '…'): the stream passes them
            pts = sorted(found.points.get(f.name, ()))
            return FieldSpec(
                f.name, ty, "order", points=np.array(pts, dtype=np.int64) if pts else None
            )
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
        """``key_values[r]``: the values of the key fields (one row, a column per field) of
        the key of rank ``r``; ``keys`` distinct combinations."""
        if self.key_field is None:
            self.key_values = None
            self.key_cdf = None
            return
        p = self.keys
        domain = keys.key_domain(self.program)
        if p > domain:
            what = ", ".join(self.key_fields)
            raise UsageError(
                f"--keys {p}: the partition key ({what}) has only {domain} distinct values"
            )
        if len(self.key_fields) == 1:
            ty = self.schema.field(self.key_field).type
            if isinstance(ty, EnumType | BoolType):
                values = np.arange(domain, dtype=np.int64)
            else:
                values = keys.key_values(ty, self.key_points[self.key_field], p)
            perm = seeded_rng(self.options.seed, 3).permutation(len(values))
            self.key_values = values[perm][:p, None]
        else:
            self.key_values = self._combinations(p)
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

    def _combinations(self, p: int) -> np.ndarray:
        """``p`` distinct combinations of the key fields' values, shuffled: each field takes
        about the ``len(fields)``-th root of ``p`` values (fewer where its type has fewer), so
        that every field varies."""
        types = [self.schema.field(n).type for n in self.key_fields]
        sizes = [keys.domain(ty) for ty in types]
        radix = [1] * len(types)
        while math.prod(radix) < p:
            grow = min((i for i in range(len(radix)) if radix[i] < sizes[i]), key=radix.__getitem__)
            radix[grow] += 1
        index = seeded_rng(self.options.seed, 3).permutation(math.prod(radix))[:p]
        out = np.zeros((p, len(types)), dtype=np.int64)
        for i in reversed(range(len(types))):  # mixed radix, the last field fastest
            digit = index % radix[i]
            index = index // radix[i]
            ty = types[i]
            if isinstance(ty, EnumType | BoolType):
                out[:, i] = digit
            else:
                values = keys.key_values(ty, self.key_points[self.key_fields[i]], radix[i])
                out[:, i] = values[digit]
        return out

    def key_columns(self, ranks: np.ndarray) -> dict[str, np.ndarray]:
        """Each key field's values for the key ranks ``ranks``."""
        assert self.key_values is not None, "a partition key"
        rows = self.key_values[ranks]
        return {name: rows[:, i] for i, name in enumerate(self.key_fields)}

    def key_ranks(self, rng: np.random.Generator, n: int) -> np.ndarray:
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

    def order_values(self, spec: FieldSpec, seqs: np.ndarray) -> np.ndarray:
        if isinstance(spec.type, Float32Type):
            return seqs.astype(np.float32)
        lo, hi = _safe_range(spec.type)
        base = 0 if lo <= 0 <= hi else lo
        if spec.points is not None:  # around the constants: half the stream before them
            base = max(lo, min(int(spec.points.min()) - max(self.n - 1, 1) // 2, hi - self.n))
        span = hi - base
        last = max(self.n - 1, 1)
        if spec.name in self.unit_fields:
            return base + seqs
        if last <= span:
            step = max(1, min(span // last, 10))
            return base + seqs * step
        return base + (seqs * span) // last

    def draw(
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
            if s.role == "key":  # the ranks in the first key field (the others follow them)
                cols[s.name] = (
                    self.key_ranks(rng, n) if s.name == self.key_field else np.zeros(n, np.int64)
                )
            elif s.role == "order":
                cols[s.name] = self.order_values(s, seqs)
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

    def dtype(self, name: str):
        s = next(s for s in self.specs if s.name == name)
        if isinstance(s.type, Float32Type):
            return np.float32
        if isinstance(s.type, BoolType):
            return bool
        return np.int64

    def typed(self, cols: dict[str, np.ndarray], key_rank: bool = True) -> dict:
        """Columns as the reference matcher types them (UINT as uint64, keys as values)."""
        out = {}
        keys = {}
        if key_rank and self.key_values is not None:
            keys = self.key_columns(cols[self.key_field])
        for s in self.specs:
            v = keys[s.name] if s.name in keys else cols[s.name]
            if isinstance(s.type, BoolType):
                v = v.astype(bool)
            elif isinstance(s.type, UIntType):
                v = v.astype(np.uint64)
            out[s.name] = v
        return out

    def key_text(self, rank: int) -> str | None:
        """The key of rank ``rank`` as the vectors' ``partition`` column writes it
        (:func:`nfacep.result.partition_cells`)."""
        from nfacep.io.tuples import format_value
        from nfacep.result import partition_cells

        assert self.key_values is not None, "a partition key"
        texts = tuple(
            format_value(int(v), self.schema.field(name).type)
            for name, v in zip(self.key_fields, self.key_values[rank], strict=True)
        )
        return partition_cells([texts[0] if len(texts) == 1 else texts])[0]

    def sample_rates(self, nfa: Nfa, n: int = 1 << 16) -> dict[str, float]:
        """Share of background tuples satisfying each decoder predicate."""
        cols = self.draw(seeded_rng(self.options.seed, 4), np.arange(n, dtype=np.int64))
        typed = {**self.typed(cols), **self.params}
        # PREV: the sample's rows before, as if of one partition (null for its first rows)
        for f, depth in nfa.history.items():
            for k in range(1, depth + 1):
                typed[prev_of(f, k)] = np.roll(typed[f], k)
                typed[known_of(k)] = np.arange(n) >= k
        return {p.text: round(float(evaluate(p.expr, typed, n).mean()), 4) for p in nfa.predicates}
