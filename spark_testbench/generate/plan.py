"""Where each block of the stream plants its instances, and the blocks themselves.

Each block places some of the templates (:mod:`.templates`), on keys no other planted
instance uses over the same span, and moves background tuples of that key out of the span, so
each planted run is contiguous in its partition's sub-stream.

Long instances of a windowed query are laid out without gaps when gaps would stretch them past
the window. Each block places up to two window edge instances of each kind per windowed query,
after the others, at positions no other instance uses and never moved (so, at one ORDER BY
unit per position, exactly ``n - 1`` or ``n`` apart), on a key no other instance uses over the
span, with a key left free for the background moved out of every span. For an every-end query
a fit's last tuple is a match, and a miss's is not: a run of its key ending there starts at or
before its first tuple (``n`` or more before) or inside it (which the templates' check rules
out).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from nfacep.lang.types import BoolType

from .background import Background, seeded_rng
from .templates import KINDS, WINDOW_KINDS, Templates

__all__ = ["Plan", "Planted"]

_WINDOW_PER_BLOCK = 2  #: instances of each window kind per windowed query and block
_KIND_WEIGHT = {"short": 0.45, "long": 0.2, "overlap": 0.2, "repeat": 0.15}
_KIND_GAP = {"short": 4, "long": 48, "overlap": 4, "repeat": 4}


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


class Plan:
    """The blocks of the stream: where each plants its instances (:meth:`planted`) and its
    columns (:meth:`block`)."""

    def __init__(self, background: Background, templates: Templates):
        self.bg = background
        self.templates = templates.templates
        self.window_templates = templates.window_templates

    @property
    def n_blocks(self) -> int:
        return max(1, math.ceil(self.bg.n / self.bg.options.block_tuples))

    def bounds(self, b: int) -> tuple[int, int]:
        start = b * self.bg.options.block_tuples
        return start, min(self.bg.n, start + self.bg.options.block_tuples)

    def _plan(self, b: int) -> list[_Instance]:
        start, stop = self.bounds(b)
        length = stop - start
        rng = seeded_rng(self.bg.options.seed, 1, b)
        inst = self._plan_kinds(b, length, rng)
        if (
            self.bg.interleaved
            and length
            and self.bg.options.plant_rate
            and any(self.window_templates)
        ):
            inst = self._plan_windows(inst, length, rng)
        return inst

    def _plan_kinds(self, b: int, length: int, rng) -> list[_Instance]:
        """The instances of KINDS block ``b`` plants."""
        queries = [qi for qi, lib in enumerate(self.templates) if lib]
        if not queries or length == 0 or self.bg.options.plant_rate == 0:
            return []
        lens = [t.n for lib in self.templates for t in lib]
        mean = sum(lens) / len(lens)
        want = max(len(queries), round(self.bg.options.plant_rate * length / mean))
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
            if self.bg.interleaved:
                gaps = rng.integers(1, _KIND_GAP[kind], n - 1, endpoint=True)
                offs = np.concatenate([[0], np.cumsum(gaps)]).astype(np.int64)
                window = self.bg.program.queries[qi].window
                if offs[-1] >= length or (window is not None and offs[-1] >= window):
                    offs = np.arange(n, dtype=np.int64)  # (gaps would break the window)
            else:
                offs = np.arange(n, dtype=np.int64)
            first = int(rng.integers(0, length - int(offs[-1])))
            inst.append(_Instance(qi, kind, j, first + offs))
        if not inst:
            return []
        if self.bg.interleaved:
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
                        key = self._free_key(out, int(pos[0]), int(pos[-1]), rng, lib[j].key)
                        if key is None:
                            continue
                        out.append(_Instance(qi, kind, j, pos, key))
                        used[pos] = True
                        break
        out.sort(key=lambda x: int(x.pos[0]))
        return out

    def _free_key(
        self, inst: list[_Instance], s: int, e: int, rng, want: int | None = None
    ) -> int | None:
        """A key for an instance spanning ``s … e``: none of ``inst`` overlapping it uses it,
        and over its span and theirs some key stays free (where background tuples of an
        instance's key go, :meth:`_clear_spans`); only ``want`` when given (the key its
        template was built for), else None."""

        def over(a: int, z: int) -> list[_Instance]:
            return [y for y in inst if int(y.pos[0]) <= z and int(y.pos[-1]) >= a]

        near = over(s, e)
        busy = [{y.key for y in near}]
        busy += [{y.key for y in over(int(x.pos[0]), int(x.pos[-1]))} for x in near]
        r = int(self.bg.key_ranks(rng, 1)[0]) if want is None else want
        for _ in range(self.bg.keys if want is None else 1):
            if r not in busy[0] and all(len(k | {r}) < self.bg.keys for k in busy):
                return r
            r = (r + 1) % self.bg.keys
        return None

    def _assign_keys(self, inst: list[_Instance], rng) -> list[_Instance]:
        inst.sort(key=lambda x: int(x.pos[0]))
        ranks = self.bg.key_ranks(rng, len(inst))
        kept: list[_Instance] = []
        active: list[tuple[int, int]] = []  # (end, key) of kept instances
        for x, r in zip(inst, ranks.tolist(), strict=True):
            s = int(x.pos[0])
            active = [a for a in active if a[0] >= s]
            taken = {k for _, k in active}
            if len(taken) >= self.bg.keys - 1:
                continue  # keep a key free for the background around it
            want = self.templates[x.query][x.template].key
            if want is not None:  # (built for its key: planted there, or not at all)
                if want in taken:
                    continue
                r = want
            while r in taken:
                r = (r + 1) % self.bg.keys
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
            if self.bg.key_field is not None:
                part = self.bg.key_text(x.key)
            out.append(
                Planted(
                    start + int(x.pos[-1]),
                    self.bg.program.queries[x.query].name,
                    x.kind,
                    part,
                    start + int(x.pos[0]),
                )
            )
        return out

    def block(self, b: int) -> dict[str, np.ndarray]:
        """Columns of block ``b`` (``seq`` first), in the generator's internal types."""
        start, stop = self.bounds(b)
        seqs = np.arange(start, stop, dtype=np.int64)
        cols = self.bg.draw(seeded_rng(self.bg.options.seed, 0, b), seqs)
        plan = self._plan(b)
        planted = np.zeros(len(seqs), dtype=bool)
        fixed = {s.name for s in self.bg.specs if s.role in ("key", "order")}
        for x in plan:
            lib = self.window_templates if x.kind in WINDOW_KINDS else self.templates
            t = lib[x.query][x.template]
            for name, values in t.rows.items():
                if name not in fixed:
                    cols[name][x.pos] = values
            if self.bg.key_field is not None:
                cols[self.bg.key_field][x.pos] = x.key
            planted[x.pos] = True
        if self.bg.interleaved and plan:
            self._clear_spans(cols[self.bg.key_field], planted, plan)
        if self.bg.key_field is not None:
            for name, values in self.bg.key_columns(cols[self.bg.key_field]).items():
                if isinstance(self.bg.schema.field(name).type, BoolType):
                    values = values.astype(bool)
                cols[name] = values
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
            for _ in range(self.bg.keys):
                r = (r + 1) % self.bg.keys
                if r not in busy:
                    seg[bad] = r
                    break


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
