"""The table partitioner's stages after the block-RAM read (``_Stages``): the simple tail
(decide and update in the cycle after the read) or the registered one (stage 3 decides, stage 4
updates, the writes in flight forwarded by :mod:`nfacep.hdl.table_forwarding`)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data

from . import table_forwarding
from .bram import register_copy
from .table_forwarding import Forwarding
from .table_stamps import StampStages


class _Stages(StampStages, Forwarding):
    """The stages after the block-RAM read of a :class:`TablePartitioner`: the simple one
    (decide and update in the cycle after the read) or the registered ones.

    An operation is a tuple (``valid``) or, with timers, an aging step (``op.sweep``), or
    neither (a bubble). An aging step at (row, way ``bank``) writes that way's entry invalid
    if it holds an entry that has aged out (``(op.now - stamp) mod 2**S >= M``) and otherwise
    writes nothing; it passes through the same stages and forwarding as a tuple, so it sees
    every write before it and every operation after it sees its write."""

    def __init__(self, table, m: Module, advance, layout, row_bits, bank_bits):
        self.table, self.m, self.advance, self.layout = table, m, advance, layout
        self.row_bits, self.bank_bits = row_bits, bank_bits
        self.banks = table.banks
        self.direct = table.direct
        self.timers = table.timers
        self.max_age = (1 << table._timer_bits) - 1

    def decide(self, key, bank, matches, free, name):
        """hit, dropped, way from the ways' match and free bits (hashed) or the bank (direct;
        ``matches`` then holds each bank's live bit)."""
        m = self.m
        hit = Signal(name=f"{name}_hit")
        dropped = Signal(name=f"{name}_dropped")
        way = Signal(self.bank_bits, name=f"{name}_way")
        if self.direct:
            m.d.comb += [hit.eq(matches.bit_select(bank, 1)), way.eq(bank), dropped.eq(0)]
            return hit, dropped, way
        m.d.comb += [hit.eq(matches.any()), dropped.eq(~matches.any() & ~free.any())]
        for b in range(self.banks):  # one-hot when hit: the key is stored at most once
            with m.If(matches[b]):
                m.d.comb += way.eq(b)
        with m.If(~matches.any()):
            for b in reversed(range(self.banks)):  # the lowest free way wins
                with m.If(free[b]):
                    m.d.comb += way.eq(b)
        return hit, dropped, way

    def tag_equal(self, tag, key):
        """Whether an entry with ``tag`` holds ``key``: direct, an entry's address is its key,
        so any entry a tuple looks at (its row, its bank) is its own."""
        return Const(1) if self.direct else Value.cast(tag) == key

    def update(
        self, current, payload, name, hint=None, ahead=None, gaps=None, early=None, ahead_state=None
    ):
        """``update``'s new state and result (and, given ``hint``, its hints for the payloads
        ``ahead``), as signals; with the table's ``result_stage`` and an ``update.finish``,
        the result pending (chosen after the register); given ``early``, what
        ``update.early`` worked out of the state a stage before."""
        table, m = self.table, self.m
        given = {} if hint is None else {"hint": hint, "ahead": ahead, "gaps": gaps}
        if ahead_state is not None:
            given["ahead_state"] = ahead_state
        if early is not None:
            given["early"] = early
        shape = table._result_shape
        if table._finish is not None:  # the result before its choice, chosen after stage 5
            given["pending"] = True
            shape = table._update.pending_width
        out = table._update(m, current, payload, **given)
        new_state = Signal(table._state_width, name=f"{name}_new_state")
        result = Signal(shape, name=f"{name}_result")
        m.d.comb += [new_state.eq(out[0]), result.eq(out[1])]
        if hint is None:
            return new_state, result
        later = [
            Signal(table._update.ahead_width, name=f"{name}_ahead{k}", attrs={"keep": 1})
            for k in range(len(out[2]))
        ]
        m.d.comb += [h.eq(v) for h, v in zip(later, out[2], strict=True)]
        return new_state, result, later

    def entry(self, key, state, op, name):
        """What an operation writes: a tuple its entry, an aging step an invalid one."""
        written = Signal(self.layout, name=name)
        with self.m.If(~op.sweep):
            self.m.d.comb += [
                written.valid.eq(1),
                written.state.eq(state),
                written.stamp.eq(op.now),
            ]
            if not self.direct:
                self.m.d.comb += written.tag.eq(key)
        return written

    def operation(self, t_valid, op, bank, dropped, way, expired):
        """(store, way) of an operation decided now: a tuple stores unless dropped, an aging
        step stores (invalid) if its way has aged out."""
        store = Signal(name="op_store")
        chosen = Signal(self.bank_bits, name="op_way")
        m = self.m
        m.d.comb += [store.eq(t_valid & ~dropped), chosen.eq(way)]
        if self.timers:
            with m.If(op.sweep):
                m.d.comb += [store.eq(expired.bit_select(bank, 1)), chosen.eq(bank)]
        return store, chosen

    def simple_tail(self, t, t_valid, op, t_row, t_bank, seen):
        """Decide, update and write back in the cycle after the read (the read ports are
        transparent for the write ports)."""
        m = self.m
        key = Value.cast(t.key).as_unsigned()
        live = Cat(self.live(e.valid, e.stamp, op) for e in seen)
        matches = Cat(live[b] & self.tag_equal(e.tag, key) for b, e in enumerate(seen))
        expired = Cat(e.valid for e in seen) & ~live
        hit, dropped, way = self.decide(key, t_bank, matches, ~live, "last")
        current = Signal(self.table._state_width, name="last_state")
        for b in range(self.banks):
            with m.If(hit & (way == b)):
                m.d.comb += current.eq(seen[b].state)
        new_state, result = self.update(current, t.payload, "last")
        written = self.entry(key, new_state, op, "last_written")
        decided, chosen = self.operation(t_valid, op, t_bank, dropped, way, expired)
        store = Signal(name="last_store")
        m.d.comb += store.eq(self.advance & decided)
        return t, t_valid, hit, dropped, chosen, t_row, written, store, result

    def registered_tail(self, prev, s2, s2_valid, s2_op, s2_row, s2_bank, read):
        """The stages from the last read register on. ``read`` is each bank's data of the row
        read for the operation in ``s2`` (the cycle before stage 3), or with five read
        registers for the one in ``prev``, ``(key, row, op)`` of the operation a stage before.
        Stage 3 decides (hit, way, drop), stage 4 updates the state and hands the entry to
        ``hist[0]``, from where it is written.

        The read for an operation reaching stage 3 missed the writes decided in the last
        ``read_stages + 2`` advancing cycles: the operation in stage 4 (decided last cycle) and
        ``hist[0..read_stages]``. For each way the newest of those that went to the operation's
        row replaces what was read: whether it is in use at the operation's tick, whether its
        key is the tuple's, its state. This is worked out over three cycles, so that no cycle
        holds more than a comparison or a choice between registers:

        - two cycles before stage 3 each source's row, key and tick are compared with the
          operation's (``prev``), for the writes that will then be ``hist[0..read_stages]``;
        - the cycle before, with their decisions (store, way) now in registers, the newest
          source per way is chosen, or else the row read, whose tag and stamp are compared
          now (with five read registers, beside the writes in flight the cycle before); the
          result is registered per way (``pre_*``);
        - in stage 3 only the write decided in the cycle before, by the operation now in
          stage 4, can still replace it (its row, key and tick compared the cycle before).

        The state a hit finds is taken as the tuple enters stage 4, from the update being made
        there in that cycle when the operation ahead wrote the same entry."""
        table = self.table
        hist_layout = data.StructLayout(
            {"valid": 1, "row": self.row_bits, "way": self.bank_bits, "entry": self.layout}
        )
        stages = table._missed
        # hist[k] is the write handed on k + 1 advancing edges ago (hist[0] reaches its bank);
        # the oldest write an operation in stage 3 missed, hist[stages], is merged before it
        # gets there, as hist[stages - 1], so it is not kept
        self.hist = hist = [Signal(hist_layout, name=f"hist{i}") for i in range(stages)]
        s3, s4 = self._tail_registers(s2.shape(), s2_op.shape())
        t, t_valid, t_op, t_row, t_bank = s3
        u, u_valid, u_op, u_row, u_way, u_hit, u_dropped, u_state, u_store = s4

        key = Value.cast(t.key).as_unsigned()
        u_key = Value.cast(u.key).as_unsigned()

        # stage 4's update (its entry is the newest write of the cycle)
        new_state, result = self._stage4(t, u, u_state, s2, prev[3])
        self.written = written = self.entry(u_key, new_state, u_op, "s4_written")

        # two cycles before stage 3: row, key and tick of the writes that will be
        # hist[0..stages] then, as they stand now (newest first: stage 3's operation, stage
        # 4's, hist[0..stages - 2])
        ident = [(t_row, key, ~t_op.sweep, t_op.now), (u_row, u_key, ~u_op.sweep, u_op.now)]
        ident += [(h.row, h.entry.tag, h.entry.valid, h.entry.stamp) for h in hist[:-1]]
        # and the decisions (store, way) already made: all but stage 3's
        known = [None, (u_store, u_way)] + [(h.valid, h.way) for h in hist[:-1]]
        # :meth:`_rows_before` says why
        self.spread = (table.spread or self.early_fn is not None) and self.prepare is None
        before = self._rows_before(s2_row, t_row, u_row, hist)
        self.prev_key, self.prev_row, self.s3_payload = prev[0], prev[1], t.payload
        rel = self._relations(prev, ident, known, self._source_hints(hist), before)
        # the cycle before stage 3: their decisions are registers now (stage 4's,
        # hist[0..stages - 1])
        decided = [(u_store, u_way, written.state)]
        decided += [(h.valid, h.way, h.entry.state) for h in hist]
        pre = self._newest(prev, s2, s2_op, read, decided, rel)
        self.s2_bank = s2_bank
        hit, dropped, way3, store3, found = self._stage3(
            t, t_valid, t_op, t_row, t_bank, s2, s2_op, s2_row, pre, (u_store, u_way, new_state)
        )
        if self.found_next is not None:  # the copy of s4_state the update's hint ahead reads
            stale = table_forwarding.BREAK_FORWARDING == "ahead state"
            self.m.d.comb += self.found_next.eq(u_state if stale else found)

        self._advance_tail(
            (s2, s2_valid, s2_op, s2_row, s2_bank),
            s3,
            s4,
            (way3, hit, dropped, found, store3),
            written,
        )
        return u, u_valid, u_hit, u_dropped, u_way, u_row, written, u_store, result

    def _rows_before(self, s2_row, t_row, u_row, hist):
        """The rows the writes in flight come from, a stage before (their relations to the
        operation's row compared a cycle earlier, against the operation a stage before
        ``prev``), for a table spread over the device or one with PREV's split comparisons
        (``update.early``); else ``None``. Such a table takes its row read through the last
        gate (:meth:`_newest`) and compares those rows a cycle early (PREV at 4,096 entries,
        not spread, measured better at both seeds with them); with the windows' hints
        (``update.prepare``) it does neither (the window at 16,384 entries measured worse at
        both seeds with them: benchmarks/PAPER_FIGURES.md): ``self.spread``, set before."""
        if self.early_row is None or not self.spread:
            return None
        return [s2_row, t_row, u_row] + [h.row for h in hist[:-2]]

    def _stage4(self, t, u, u_state, s2, prev_payload):
        """Stage 4's update of the state found: ``(new_state, result)``. With
        ``update.prepare``, the update takes the hint worked out before stage 4 (``u_hint``),
        and makes the hint of its new state for the operation in stage 3 (``ahead_hint``),
        beside itself, with the ``gap`` of the two payloads worked out a cycle before (the
        operations behind that one take the hint of the new state from the register it is
        handed on to, ``hist[0]``)."""
        table, m = self.table, self.m
        self.prepare = getattr(table._update, "prepare", None)
        self.u_hint = self.ahead_hint = self.found_next = None
        # what ``update.early`` worked out of the state found in stage 3 (PREV's comparisons'
        # high bits), loaded by :meth:`_stage3_early`
        self.early_fn = getattr(table._update, "early", None)
        self.u_early = None
        if self.early_fn is not None:
            self.u_early = Signal(table._update.early_width, name="s4_early_taken")
        if self.prepare is None:
            return self.update(u_state, u.payload, "s4", early=self.u_early)
        # the hint stage 4 takes: stage 3's choice among hints worked out before (``u_hint``),
        # or, when the operation just ahead wrote the entry (``u_new``), the update's own for
        # it, registered as it is made (``u_ahead``), or, when the operation two ahead did
        # (``u_late``), the hint of its entry, worked out in stage 3 from the register that
        # holds it (``u_late_hint``), so that no choice follows a comparison
        width = table._update.hint_width
        self.u_hint = Signal(width, name="s4_hint")
        self.u_new = Signal(name="s4_hint_new")
        self.u_ahead = Signal(table._update.ahead_width, name="s4_hint_ahead")
        self.u_late = Signal(name="s4_hint_late")
        self.u_late_hint = Signal(width, name="s4_late_hint")
        hint = Signal(width, name="s4_hint_taken")
        settled = table._update.settle(m, self.u_ahead)
        m.d.comb += hint.eq(
            Mux(self.u_new, settled, Mux(self.u_late, self.u_late_hint, self.u_hint))
        )
        # the payload the hints of a write in flight are worked out for two cycles before
        # stage 3, the operation's then
        self.early = (
            s2.payload if table_forwarding.BREAK_FORWARDING == "early hint" else prev_payload
        )
        self.prev_payload = prev_payload
        gap = Signal(table._update.gap_width, name="s3_gap")
        later = t.payload if table_forwarding.BREAK_FORWARDING == "ahead hint" else s2.payload
        with m.If(self.advance):
            m.d.sync += gap.eq(table._update.gap(m, t.payload, later))
        now = self.payload_copy(s2.payload, t.payload, "s3_ahead_payload")
        if table_forwarding.BREAK_FORWARDING == "ahead hint":
            now = u.payload
        # with timers, the update's hint for stage 3's tuple from a copy of its own of the
        # state found (loaded as ``s4_state`` is, with ``found_next``), so that ``s4_state``
        # does not drive its comparisons (measured better with timers at both seeds, worse
        # without: benchmarks/PAPER_FIGURES.md)
        copy = None
        if self.timers:
            self.found_next = Signal(table._state_width, name="s3_found_next")
            copy = register_copy(m, self.platform, self.found_next, self.advance, "s4_ahead_state")
        new_state, result, self.ahead_hint = self.update(
            u_state,
            u.payload,
            "s4",
            hint=hint,
            ahead=[now],
            gaps=[gap],
            early=self.u_early,
            ahead_state=copy,
        )
        return new_state, result

    def _source_hints(self, hist):
        """With ``update.prepare``, the hint of each write in flight, in the order of
        ``_relations``' sources, for the operation two cycles before stage 3, from their
        entries (``None`` for stage 3's and stage 4's, whose states are not in a register yet:
        stage 4's is worked out a cycle later, from ``hist[0]``). Without, ``None``."""
        if self.prepare is None:
            return None
        hints = [None, None]
        for k, h in enumerate(hist[:-1]):
            # each against a copy of its own of the operation's payload, when a read register
            # holds the operation a stage before it (``early_payload``)
            early = self.early
            if self.early_payload is not None and early is self.prev_payload:
                early = self.payload_copy(self.early_payload, early, f"s1_hist_payload{k}")
            hints.append(self.prepare(self.m, h.entry.state, early))
        return hints

    def _tail_registers(self, in_layout, op_shape):
        """The registers of stage 3 (payload, valid, op, row, bank) and of stage 4 (payload,
        valid, op, row, way, hit, dropped, state found, store): stage 3's decision."""
        # stage 3
        t = Signal(in_layout, name="s3")
        t_valid = Signal(name="s3_valid")
        t_op = Signal(op_shape, name="s3_op")
        t_row = Signal(self.row_bits, name="s3_row")
        t_bank = Signal(self.bank_bits, name="s3_bank")
        # stage 4: the decision of stage 3, the state found
        u = Signal(in_layout, name="s4")
        u_valid = Signal(name="s4_valid")
        u_op = Signal(op_shape, name="s4_op")
        u_row = Signal(self.row_bits, name="s4_row")
        u_way = Signal(self.bank_bits, name="s4_way")
        u_hit = Signal(name="s4_hit")
        u_dropped = Signal(name="s4_dropped")
        u_state = Signal(self.table._state_width, name="s4_state")
        u_store = Signal(name="s4_store")  # stage 3's decision: write `written`
        return (
            (t, t_valid, t_op, t_row, t_bank),
            (u, u_valid, u_op, u_row, u_way, u_hit, u_dropped, u_state, u_store),
        )

    def _advance_tail(self, s2, s3, s4, decision, written):
        """On an advancing edge: stage 3 takes the operation in ``s2``, stage 4 stage 3's with
        its ``decision`` (way, hit, dropped, state found, store), and ``hist`` stage 4's
        write."""
        s2, s2_valid, s2_op, s2_row, s2_bank = s2
        t, t_valid, t_op, t_row, t_bank = s3
        u, u_valid, u_op, u_row, u_way, u_hit, u_dropped, u_state, u_store = s4
        way3, hit, dropped, found, store3 = decision
        hist = self.hist
        with self.m.If(self.advance):
            self.m.d.sync += [
                t_valid.eq(s2_valid),
                t.eq(s2),
                t_op.eq(s2_op),
                t_row.eq(s2_row),
                t_bank.eq(s2_bank),
                u_valid.eq(t_valid),
                u.eq(t),
                u_op.eq(t_op),
                u_row.eq(t_row),
                u_way.eq(way3),
                u_hit.eq(hit),
                u_dropped.eq(dropped),
                u_state.eq(found),
                u_store.eq(store3),
                hist[0].valid.eq(u_store),
                hist[0].row.eq(u_row),
                hist[0].way.eq(u_way),
                hist[0].entry.eq(written),
            ]
            self.m.d.sync += [h.eq(older) for h, older in zip(hist[1:], hist, strict=False)]
