"""The planted instances' templates: per query, a small library of concrete tuple sequences
drawn from the pattern (a word of pattern variables, each filled with a background tuple that
satisfies the variable's predicate) and checked with the reference matcher: ``short``
(near-minimal repetitions), ``long`` (long repetitions, laid out with wide gaps so one
instance spans hundreds to thousands of stream positions), ``overlap`` (two matches whose
runs overlap; every-end queries only) and ``repeat`` (two instances back to back).

For a query with a window (``WITHIN n``), pairs of templates at its edge (``window_fit`` /
``window_miss``): 2 to ``n`` tuples that match with their first and last tuples ``n - 1``
apart and do not ``n`` apart (interior tuples in the same places; with PREV, the lead-in
tuples just before the first). Where a query gets none,
``unplanted`` says why.

A query whose conditions read a partition field (``src IN '10.0.0.0/8'`` with ``PARTITION BY
src``) gets templates built and checked for one key each (``Template.key``, a key rank whose
tuples satisfy the word's first condition), which the plan plants them on; any other query's
templates fit any key.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nfacep.io.tuples import Tuples
from nfacep.lang import ast
from nfacep.lang.evaluate import evaluate
from nfacep.lang.predicates import FieldRef, Prev, known_of, nodes, prev_of
from nfacep.nfa import Nfa
from nfacep.params import EngineParams
from nfacep.reference import matcher as reference

from .background import Background, seeded_rng

__all__ = ["KINDS", "WINDOW_KINDS", "Template", "Templates"]

#: Kinds of planted instance.
KINDS = ("short", "long", "overlap", "repeat")
#: Kinds planted for queries with a window (WITHIN n): first and last tuples n - 1 apart in the
#: ORDER BY field (a match at the last) and n apart (no match there).
WINDOW_KINDS = ("window_fit", "window_miss")
_WINDOW_WANT = 3  #: fit/miss template pairs per windowed query
_KIND_WANT = {"short": 6, "long": 4, "overlap": 4, "repeat": 3}
_MAX_WORD = 400


@dataclass
class Template:
    query: int
    kind: str
    rows: dict[str, np.ndarray]
    n: int
    #: window kinds: each tuple's position (and ORDER BY value) after the first's
    offs: np.ndarray | None = None
    #: the key rank it was built for (its query's conditions read a partition field), or None
    key: int | None = None


class Templates:
    """The templates of every query (picklable once built): ``templates`` (per query, of
    :data:`KINDS`), ``window_templates`` (per query, of :data:`WINDOW_KINDS`) and
    ``unplanted`` (query: why it has none, of some kinds)."""

    def __init__(self, nfa: Nfa, background: Background):
        self.bg = background
        self.templates: list[list[Template]] = []  # per query
        self.window_templates: list[list[Template]] = []  # per query: WINDOW_KINDS
        self.unplanted: dict[str, str] = {}  # query -> why it has no templates (of some kinds)
        self._nfa = nfa
        self._history = nfa.history  #: PREV's fields and how far back it reads them
        keyed = set(self.bg.key_fields) if self.bg.interleaved else set()
        #: the queries whose conditions read a partition field: their templates hold for a key
        self._reads_key = {
            q.name
            for q in self.bg.program.queries
            if any(
                isinstance(node, FieldRef | Prev) and node.name in keyed
                for pred in q.predicates.values()
                for node in nodes(pred)
            )
        }
        self._build_templates()
        self._build_window_templates()
        self._nfa = None  # workers compile their own; keep the pickle small

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

    def _pool(self, q, var: str, rng: np.random.Generator, pools: dict, key: int | None):
        """Up to 256 background tuples satisfying ``var``'s predicate (all of key rank ``key``
        when given), or None."""
        at = (q.name, var) if key is None else (q.name, var, key)
        if at in pools:
            return pools[at]
        pred = None if var == "." else q.predicates.get(var)
        found = None
        for attempt in range(6):
            cols = self.bg.draw(rng, np.arange(4096, dtype=np.int64), focus=attempt >= 2)
            if key is not None:
                cols[self.bg.key_field][:] = key
            if pred is None:
                ok = np.arange(256)
            else:
                ok = np.flatnonzero(
                    evaluate(pred, {**self.bg.typed(cols), **self.bg.params}, 4096)
                )[:256]
            if len(ok):
                found = {k: v[ok] for k, v in cols.items()}
                break
        pools[at] = found
        return found

    def _fill(
        self, q, word: list[str], rng, pools, key: int | None
    ) -> dict[str, np.ndarray] | None:
        if self._history:
            return self._fill_after(q, word, rng, pools, key)
        parts: dict[str, list] = {s.name: [] for s in self.bg.specs}
        for var in word:
            pool = self._pool(q, var, rng, pools, key)
            if pool is None:
                return None
            i = int(rng.integers(len(pool[self.bg.specs[0].name])))
            for k, v in pool.items():
                parts[k].append(v[i])
        return {k: np.array(v, dtype=self.bg.dtype(k)) for k, v in parts.items()}

    def _fill_after(
        self, q, word: list[str], rng, pools, key: int | None
    ) -> dict[str, np.ndarray] | None:
        """The tuples of ``word`` for queries that read PREV: a variable's condition then
        depends on the tuples before, so they are chosen one by one, each among background
        tuples (a fixed draw, :meth:`_draws`) that satisfy its variable given those before it,
        and the nearest of them to the tuple before in the fields PREV reads (so that runs
        rise or fall by small steps and last); after as many lead-in tuples as PREV reads
        back, so that the word's first tuple reads the template's own tuples."""
        cols, typed = self._draws(rng, pools, key)
        n = len(next(iter(cols.values())))
        lead = max(self._history.values())
        chosen = rng.integers(n, size=lead).tolist()
        known = {known_of(k): np.ones(n, dtype=bool) for k in range(1, lead + 1)}
        for var in word:
            pred = None if var == "." else q.predicates.get(var)
            if pred is None:
                chosen.append(int(rng.integers(n)))
                continue
            before = {
                prev_of(f, k): np.full(n, typed[f][chosen[-k]])
                for f, depth in self._history.items()
                for k in range(1, depth + 1)
            }
            ok = np.flatnonzero(evaluate(pred, {**typed, **self.bg.params, **before, **known}, n))
            if not len(ok):
                return None
            step = sum(
                np.abs(typed[f][ok].astype(float) - float(typed[f][chosen[-1]]))
                for f in self._history
            )
            near = ok[np.argsort(step, kind="stable")[:8]]
            chosen.append(int(near[int(rng.integers(len(near)))]))
        at = np.array(chosen, dtype=np.int64)
        return {k: v[at] for k, v in cols.items()}

    def _draws(self, rng, pools, key: int | None = None):
        """The background tuples PREV templates and templates' keys are chosen from (drawn
        once): plain and focused on the compared constants, and their typed columns; with
        ``key``, the same tuples all of that key rank."""
        if "draws" not in pools:
            a = self.bg.draw(rng, np.arange(4096, dtype=np.int64))
            b = self.bg.draw(rng, np.arange(4096, dtype=np.int64), focus=True)
            cols = {k: np.concatenate([a[k], b[k]]) for k in a}
            pools["draws"] = cols, self.bg.typed(cols)
        if key is None:
            return pools["draws"]
        at = (None, "draws", key)
        if at not in pools:
            cols = dict(pools["draws"][0])
            cols[self.bg.key_field] = np.full_like(cols[self.bg.key_field], key)
            pools[at] = cols, self.bg.typed(cols)
        return pools[at]

    def _key_for(self, q, word: list[str], rng, pools) -> int | None:
        """The key rank a template of ``q`` made of ``word`` is built for, when ``q``'s
        conditions read a partition field: the key of a drawn tuple that satisfies the word's
        first condition (PREV reading another drawn tuple); -1 when none does; None for a
        query whose templates fit any key."""
        if q.name not in self._reads_key:
            return None
        cols, typed = self._draws(rng, pools)
        n = len(next(iter(cols.values())))
        pred = next((q.predicates[v] for v in word if q.predicates.get(v) is not None), None)
        if pred is None:
            return int(cols[self.bg.key_field][int(rng.integers(n))])
        other = rng.permutation(n)
        lead = max(self._history.values(), default=0)
        before = {
            prev_of(f, k): typed[f][other]
            for f, depth in self._history.items()
            for k in range(1, depth + 1)
        }
        known = {known_of(k): np.ones(n, dtype=bool) for k in range(1, lead + 1)}
        ok = np.flatnonzero(evaluate(pred, {**typed, **self.bg.params, **before, **known}, n))
        return int(cols[self.bg.key_field][ok[int(rng.integers(len(ok)))]]) if len(ok) else -1

    def _ends(
        self,
        rows: dict[str, np.ndarray],
        qi: int,
        offs: np.ndarray | None = None,
        key: int | None = None,
    ) -> np.ndarray:
        """Where query ``qi`` reports matches on ``rows`` alone (one key: rank ``key``, or any
        for a query that does not read it); ORDER BY values as at positions ``0 … n-1`` of
        the stream, or ``base + offs`` when given."""
        n = len(next(iter(rows.values())))
        cols = dict(rows)
        seqs = np.arange(n, dtype=np.int64)
        for s in self.bg.specs:
            if s.role == "order":
                cols[s.name] = (
                    self.bg.order_values(s, seqs)
                    if offs is None
                    else self.bg.order_values(s, np.zeros(1, dtype=np.int64)) + offs
                )
            elif s.role == "key":
                rank = key if key is not None and s.name == self.bg.key_field else 0
                cols[s.name] = np.full(n, rank, dtype=np.int64)
        result = reference.run(
            self._nfa,
            Tuples(self.bg.typed(cols), n),
            EngineParams(partitions=1),
            values=self.bg.values,
        )
        return result.seqs[result.queries == qi]

    def _check(self, kind: str, rows, qi: int, key: int | None) -> bool:
        n = len(next(iter(rows.values())))
        ends = self._ends(rows, qi, key=key)
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
        later = self._ends(cut, qi, key=key)
        return len(later) == 0 or later[-1] != n - e1 - 2

    def _build_templates(self) -> None:
        rng = seeded_rng(self.bg.options.seed, 2)
        pools: dict = {}
        for qi, q in enumerate(self.bg.program.queries):
            lib: list[Template] = []
            for kind in KINDS:
                if kind == "overlap" and q.skip_past_last_row:
                    continue
                found = 0
                for _ in range(40):
                    rows, key = self._candidate(q, kind, rng, pools)
                    if rows is None or not self._check(kind, rows, qi, key):
                        continue
                    n = len(rows[self.bg.specs[0].name])
                    lib.append(Template(qi, kind, rows, n, key=key))
                    found += 1
                    if found == _KIND_WANT[kind]:
                        break
            if not lib:
                never = sorted(  # (pools of one key, and the shared draws, aside)
                    at[1]
                    for at, pool in pools.items()
                    if isinstance(at, tuple) and len(at) == 2 and at[0] == q.name and pool is None
                )
                why = "nothing planted: " + (
                    f"no generated tuple satisfies {', '.join(never)}"
                    if never
                    else "no sequence of generated tuples drawn from its pattern matched"
                )
                self.unplanted[q.name] = why
            self.templates.append(lib)

    def _candidate(self, q, kind: str, rng, pools) -> tuple[dict | None, int | None]:
        """A candidate template's tuples, and the key rank they are for (or None)."""
        for _ in range(8):
            word = self._word(q.pattern, rng, long=kind == "long")
            if 0 < len(word) <= _MAX_WORD:
                break
        else:
            return None, None
        key = self._key_for(q, word, rng, pools)
        if key == -1:
            return None, None
        rows = self._fill(q, word, rng, pools, key)
        if rows is None or kind in ("short", "long"):
            return rows, key
        if kind == "repeat":
            word2 = self._word(q.pattern, rng, long=False)
            more = self._fill(q, word2, rng, pools, key) if word2 else None
        elif rng.random() < 0.5 or len(word) < 2:
            # repeat the last tuple (a second end of a trailing repetition)
            more = {k: v[-1:] for k, v in rows.items()}
        else:
            # pump a suffix of the word
            k = int(rng.integers(1, len(word)))
            more = self._fill(q, word[k:], rng, pools, key)
        if more is None:
            return None, None
        return {k: np.concatenate([rows[k], more[k]]) for k in rows}, key

    def _build_window_templates(self) -> None:
        """Per windowed query, pairs of templates at the window's edge: the same tuples with the
        first and last ``n - 1`` apart (``window_fit``: a match at the last) and ``n`` apart
        (``window_miss``: none there), each checked with the reference matcher; the interior
        tuples keep their places. Why a query gets none goes to ``unplanted``."""
        rng = seeded_rng(self.bg.options.seed, 5)
        pools: dict = {}
        room = min(self.bg.options.block_tuples, self.bg.n)
        for qi, q in enumerate(self.bg.program.queries):
            lib: list[Template] = []
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
        if not self.bg.interleaved:
            return (
                "one sub-stream (no PARTITION, or --keys 1): the tuples between an "
                "instance's first and last cannot be moved to another key"
            )
        if q.order_field not in self.bg.unit_fields:
            f = self.bg.schema.field(q.order_field)
            return (
                f"the ORDER BY field {f.name} {f.type} cannot give each of the "
                f"{self.bg.n} tuples its own value"
            )
        if n < 2:
            return "WITHIN 1 only holds runs of one tuple, whose first and last are the same tuple"
        lead = max(self._history.values(), default=0)  # (PREV's lead-in tuples)
        if n + 1 + lead > room:
            where = (
                "the stream"
                if self.bg.n <= self.bg.options.block_tuples
                else f"a block (--block-tuples {self.bg.options.block_tuples})"
            )
            return (
                f"WITHIN {n}: an instance spans up to {n + 1 + lead} consecutive tuples, more than "
                f"{where} holds ({room})"
            )
        return None

    def _window_pair(self, q, qi: int, n: int, rng, pools) -> list[Template] | None:
        for _ in range(8):
            word = self._word(q.pattern, rng, long=False)
            if 2 <= len(word) <= min(n, _MAX_WORD):
                break
        else:
            return None
        key = self._key_for(q, word, rng, pools)
        if key == -1:
            return None
        rows = self._fill(q, word, rng, pools, key)
        if rows is None:
            return None
        size = len(next(iter(rows.values())))
        lead = size - len(word)  # (with PREV, lead-in tuples first, just before the word)
        inner = (
            np.sort(rng.choice(n - 2, len(word) - 2, replace=False)) + 1
            if len(word) > 2
            else np.zeros(0, dtype=np.int64)
        )
        fit = np.concatenate([np.arange(lead), lead + np.concatenate([[0], inner, [n - 1]])])
        miss = np.concatenate([np.arange(lead), lead + np.concatenate([[0], inner, [n]])])
        fit, miss = fit.astype(np.int64), miss.astype(np.int64)
        ends = self._ends(rows, qi, fit, key)
        if len(ends) == 0 or ends[-1] != size - 1:
            return None
        ends = self._ends(rows, qi, miss, key)
        if len(ends) and ends[-1] == size - 1:
            return None
        return [
            Template(qi, "window_fit", rows, size, fit, key),
            Template(qi, "window_miss", rows, size, miss, key),
        ]
