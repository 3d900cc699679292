"""A partition's entry in the programmable engine (:mod:`nfacep.hdl.programmable`) and WITHIN
in its timed state slots: the entry holds the partition's states, the epoch it was written
in and, with timed slots, each one's run start (the low
:attr:`~nfacep.image.Capacity.start_bits` of an ORDER BY value, as the fixed engine keeps
them) and the ORDER BY value of the partition's last tuple."""

from __future__ import annotations

from amaranth.hdl import Cat, Mux, Signal, Value, signed

from nfacep.image import EngineShape

__all__ = ["EPOCH_BITS", "entry_widths", "operand_shape", "timed_slots", "within"]

#: bits of the epoch each partition's entry holds beside its states
EPOCH_BITS = 8


def operand_shape(shape: EngineShape):
    """The shape of an operand's value, as an atom (and a window) sees it: every field's."""
    lo, hi = shape.operand_range()
    return signed(max(lo.bit_length() if lo < 0 else 0, hi.bit_length()) + 1)


def entry_widths(shape: EngineShape) -> tuple[int, int]:
    """What the partition store holds for the engine of ``shape``: ``(payload, state)`` bits.
    The payload, per tuple: a guard bit per state slot, and with timed slots the tuple's
    ORDER BY value; the state, per partition: its states, the epoch, and with timed slots
    each one's run start (:attr:`~nfacep.image.Capacity.start_bits`) and the ORDER BY value
    of the partition's last tuple."""
    c = shape.capacity
    time = operand_shape(shape).width if c.timed else 0
    return c.states + time, c.states + EPOCH_BITS + c.timed * c.start_bits + time


def within(distance: Value, window: Value) -> Value:
    """Whether a run ``distance`` old is inside ``window`` (docs/language.md: strictly less
    than the window)."""
    return distance < window


def timed_slots(
    mod, shape: EngineShape, field, stored: Value, state: Value, payload: Value, inside=within
) -> dict:
    """WITHIN in the timed slots ``i``: ``{i: (windowed, reached, start)}``, whether the
    slot belongs to a query with a window, whether a live run reaches it, and its run's
    start after the tuple (the low :attr:`~nfacep.image.Capacity.start_bits` of the
    ORDER BY value), as the fixed engine (:func:`nfacep.hdl.nfa.next_state`) works them
    out: a run is live iff the partition's last tuple is less than the window before this
    one and the run began less than the window before it (the difference of the low bits,
    exact for a run live at the last tuple); a slot reached by runs takes the start of the
    youngest live one (a start slot: this tuple's).

    ``field(name)``: the configuration's field ``name`` (:func:`nfacep.image.config_fields`);
    ``stored``: the partition's entry (:func:`entry_widths`), ``state`` its live states,
    ``payload`` the tuple's guards and ORDER BY value; ``inside(distance, window)`` (by default
    :func:`within`): whether a run ``distance`` old is inside ``window``."""
    c = shape.capacity
    if not c.timed:
        return {}
    k, base = c.start_bits, c.states + EPOCH_BITS
    time = Value.cast(payload)[c.states :].as_signed()
    last = Value.cast(stored)[base + c.timed * k :].as_signed()
    starts = [Value.cast(stored)[base + j * k : base + (j + 1) * k] for j in range(c.timed)]
    since = Signal(signed(operand_shape(shape).width + 1), name="since_last")
    mod.d.comb += since.eq(time - last)
    windows = [field(f"query{q}.window") for q in range(c.queries)]
    # every run of the query has ended: its last tuple is the window or more back
    far = Cat((since < 0) | ~inside(since, w) for w in windows)
    timed = Cat(w != 0 for w in windows)
    low = time.as_unsigned()[:k]
    ages, live = [], Signal(c.timed, name="live_runs")
    for j in range(c.timed):
        query = field(f"state{j}.query")
        window = Value.cast(0)  # its query's (one-hot)
        for q, w in enumerate(windows):
            window = window | Mux(query[q], w, 0)
        age = Signal(k, name=f"age{j}")
        mod.d.comb += [
            age.eq(low - starts[j]),
            live[j].eq(state[j] & ~(query & far).any() & inside(age, window)),
        ]
        ages.append(age)

    def beats(j, n):  # the run in j began at or after the one in n (ties: the lower)
        return ages[j] <= ages[n] if j < n else ~(ages[n] <= ages[j])

    out = {}
    for i in range(c.timed):
        cand = Signal(c.timed, name=f"runs_into{i}")
        mod.d.comb += cand.eq(field(f"state{i}.activation")[: c.timed] & live)
        start = Value.cast(0)
        for j in range(c.timed):
            win = cand[j]
            for n in range(c.timed):
                if n != j:
                    win = win & (~cand[n] | beats(j, n))
            start = start | Mux(win, starts[j], 0)
        begun = Signal(k, name=f"start{i}")
        mod.d.comb += begun.eq(Mux(field(f"state{i}.start"), low, start))
        query = field(f"state{i}.query")
        reached = field(f"state{i}.start") | cand.any()
        out[i] = ((query & timed).any(), reached, begun)
    return out
