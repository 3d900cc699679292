"""The table partitioner's forwarding (:class:`Forwarding`, a base of the registered stages in
:mod:`nfacep.hdl.table_stages`): the writes still in flight when a row was read, related to
the operation in stage 3 two cycles ahead, and the newest of them chosen per way in place of
what the block RAM read, with the update's hints for it."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Signal, Value
from amaranth.lib import data

from .bram import register_copy
from .table_groups import _STATE_CHUNK, _WIDE_STATE, GroupedChoice, _or_all

__all__ = ["BREAK_FORWARDING", "Forwarding"]


#: Test-only: a forwarding path broken on purpose, so that the tests show they catch it.
#: ``"oldest write"``: the oldest write in flight is not forwarded; ``"stale hint"``: stage 4's
#: ``update.prepare`` hint comes from the row read even when the operation just ahead wrote
#: the entry; ``"ahead hint"``: the hint of the state stage 4 forwards to stage 3's operation
#: is worked out against stage 4's payload, not stage 3's; ``"early hint"``: the hints of the
#: writes in flight, worked out two cycles before stage 3, are worked out for the operation a
#: stage ahead of the one they are for; ``"newest relation"``: whether stage 4's write goes
#: to the row of the operation a cycle before stage 3 is judged against the row of the
#: operation a stage ahead of it; ``"next relation"``: whether stage 3's operation and the next
#: one share a row and a key is loaded with the relation of the two operations a stage ahead;
#: ``"early newest"``: the high bits of PREV's comparisons (``update.early``) for the state
#: stage 3's tuple finds are worked out from the row read even when stage 4 writes it;
#: ``"late hint"``: the hint of the entry the operation two ahead wrote, which stage 4 takes
#: from a register of its own, is worked out against the next tuple's times, not stage 3's;
#: ``"written hint"``: the hint of the write handed on last, for the operation a cycle before
#: stage 3, is worked out for the operation a stage ahead of it; ``"ahead state"``: the copy of
#: the state found that the update's hint for stage 3's operation is worked out from
#: (``s4_ahead_state``) is loaded with the state found by the operation a stage ahead;
#: ``"early row"``: in a table spread over the device or with PREV's split comparisons, whether
#: a write in flight goes to the operation's row, compared a cycle before, is compared with the
#: row of the operation a stage ahead; ``"bank row"``: in a direct table spread over the
#: device, each bank's copy of the read row (``TablePartitioner._bank_copies``) is loaded at
#: every edge, stalls included, not as the register it copies; ``"write row"``: in a direct
#: table spread over the device, the copies of stage 3's and stage 4's rows that each bank's
#: write row is loaded from (``TablePartitioner._bank_write_rows``) are loaded at every edge,
#: stalls included; ``"row groups"``: in a direct table spread over the device, each bank's
#: copies of its read row and write row for every group of its blocks but the first
#: (``table.BANK_ROW_GROUPS``) are loaded at every edge, stalls included; ``"spare read"``: in
#: a table spread over the device with the windows' hints, the row read's state that its hint
#: is worked out from (each bank's spare copy of its third read register,
#: ``TablePartitioner._hint_spare``) is registered once more, a cycle late; ``"way groups"``:
#: with timers and the windows' hints, or with a wide state chosen by key, the copies of the
#: relations to the row that each group of a way's candidate state is chosen by but the first
#: (``GroupedChoice._grouped_states``) are loaded from those relations' registers, a cycle late;
#: ``"found overwritten"``: a wide state found in a hashed table without timers is the OR of
#: the ways the tuple's key was found in even when stage 4 writes the tuple's entry
#: (``GroupedChoice._found_by_key``); ``"found bubble"``: that state stage 4's new one when stage
#: 4's operation is a bubble whose key is the tuple's; ``"match any"``: in such a table, a way's
#: match bit leaves the older writes in flight out (``GroupedChoice._match_any``); ``"read
#: halves"``: in such a table, the groups' copies of the row read's match take the low half of
#: its tag's comparison only.
#: ``None`` (always, outside those tests): nothing broken.
BREAK_FORWARDING: str | None = None


class Forwarding(GroupedChoice):
    """The forwarding of the registered stages (``_Stages`` in :mod:`nfacep.hdl.table_stages`,
    which sets ``table``, ``m``, ``advance``, ``banks``, ``hist`` and the hints)."""

    @staticmethod
    def _broken(name: str) -> bool:
        """Whether :data:`BREAK_FORWARDING` is ``name`` (for :class:`GroupedChoice`, whose
        module does not import this one)."""
        return name == BREAK_FORWARDING

    def _early_same_row(self, j, before):
        """Whether source ``j``'s row is the operation's (``prev``'s), as a register loaded
        a cycle before with the comparison of the rows both come from (``before[j]``, the
        register source ``j`` is loaded from, and the row of the operation a stage before
        ``prev``), so that its relation is a gate of registers (``BREAK_FORWARDING = "early
        row"``: compared with ``prev``'s row instead, the operation a stage ahead)."""
        m = self.m
        same_row = Signal(name=f"s0_rel_row{j}")
        row = self.prev_row if BREAK_FORWARDING == "early row" else self.early_row
        with m.If(self.advance):
            m.d.sync += same_row.eq(before[j] == row)
        return same_row

    def _relations(self, prev, ident, known, hints, before=None):
        """Two cycles before stage 3: each source's (``ident``: row, key, whether it writes a
        valid entry, tick) row, key and tick against the operation in ``prev``, registered:
        ``(rel_row, rel_key, rel_live, rel_valid, rel_way, rel_hint)``, a bit per source;
        ``rel_way``, for the sources whose decision (``known``: store, way) is made already, a
        bit per way: it writes that way of the operation's row (None for the others);
        ``rel_hint``, the ``hints`` of the sources that have one (``None``: no hints).
        ``before``: each source's row a stage before (the register it is loaded from), when a
        read register holds the operation a stage before ``prev`` (``early_row``): the rows
        in ``rel_way`` are then compared a cycle earlier (:meth:`_early_same_row`)."""
        m = self.m
        stages = self.table._missed
        prev_key, prev_row, prev_op, _ = prev
        n = len(ident)  # stages + 1
        rel_row = Signal(n, name="s1_rel_row")
        rel_key = Signal(n, name="s1_rel_key")
        rel_live = Signal(n, name="s1_rel_live")
        rel_valid = Signal(n, name="s1_rel_valid")
        with m.If(self.advance):
            for j, (row, src_key, entry_valid, stamp) in enumerate(ident):
                m.d.sync += [
                    rel_row[j].eq(row == prev_row),
                    rel_key[j].eq(self.tag_equal(src_key, prev_key)),
                    rel_live[j].eq(self.live(entry_valid, stamp, prev_op, ahead=stages + 2)),
                    rel_valid[j].eq(entry_valid),
                ]
        if self._by_key():  # each source's match bit, one register (:meth:`_match_any`)
            self.rel_match = Signal(n, name="s1_rel_match")
            self.match_parts, self.read_halves = [], []
            with m.If(self.advance):
                m.d.sync += self.rel_match.eq(
                    Cat(
                        self.tag_equal(key, prev_key)
                        & self.live(valid, stamp, prev_op, ahead=stages + 2)
                        for _, key, valid, stamp in ident
                    )
                )
        rel_way = []
        self.rel_way_next = []  # what each ``rel_way`` is loaded with, for its group copies
        for j, decision in enumerate(known):
            if decision is None:
                rel_way.append(None)
                self.rel_way_next.append(None)
                continue
            store, way = decision
            bits = Signal(self.banks, name=f"s1_rel_way{j}")
            same_row = self._early_same_row(j, before) if before else ident[j][0] == prev_row
            loaded = Cat(store & same_row & (way == b) for b in range(self.banks))
            with m.If(self.advance):
                m.d.sync += bits.eq(loaded)
            rel_way.append(bits)
            self.rel_way_next.append(loaded)
        self.rel_way = rel_way
        rel_hint = None
        if hints is not None:
            rel_hint = []
            for j, hint in enumerate(hints):
                if hint is None:
                    rel_hint.append(None)
                    continue
                reg = Signal(len(Value.cast(hint)), name=f"s1_rel_hint{j}")
                with m.If(self.advance):
                    m.d.sync += reg.eq(hint)
                rel_hint.append(reg)
        return rel_row, rel_key, rel_live, rel_valid, rel_way, rel_hint

    def _read_bits(self, prev, s2, s2_op, read):
        """Per way of the row read: (match, live, valid, state). With five read registers the
        row arrives with ``prev`` and is compared beside the writes in flight (registered
        here); otherwise in this cycle."""
        m, width = self.m, self.table._state_width
        prev_key, _, prev_op, _ = prev
        s2_key = Value.cast(s2.key).as_unsigned()
        seen = []
        for b, e in enumerate(read):
            if self.table._split_stamp:
                e = self._split_read(e, b)
            if self.table._read_stages == 5:
                bits = (
                    Signal(name=f"s1_read_match{b}"),
                    Signal(name=f"s1_read_live{b}"),
                    Signal(name=f"s1_read_valid{b}"),
                    Signal(width, name=f"s1_read_state{b}"),
                )
                if self.table._split_stamp:
                    here = self.live_parts(e.valid, e.stamp)
                else:
                    here = self.live(e.valid, e.stamp, prev_op)
                with m.If(self.advance):
                    m.d.sync += [
                        c.eq(v)
                        for c, v in zip(
                            bits,
                            (here & self.tag_equal(e.tag, prev_key), here, e.valid, e.state),
                            strict=True,
                        )
                    ]
                seen.append(bits)
            else:
                here = self.live(e.valid, e.stamp, s2_op)
                seen.append((here & self.tag_equal(e.tag, s2_key), here, e.valid, e.state))
                if self._by_key():  # the match in halves, for the copies (:meth:`_match_any`)
                    tag, half = Value.cast(e.tag), len(s2_key) // 2
                    low = here & (tag[:half] == s2_key[:half])
                    self.read_halves.append((low, tag[half:] == s2_key[half:]))
        return seen

    def _stage3_hint(self, t, s2, mine, newest):
        """``update.prepare`` of the state the tuple in stage 3 finds, for stage 4: chosen as
        that state is, among hints worked out before: each way's candidate's
        (:meth:`_newest_hint`), the update's for the state being made in stage 4
        (``ahead_hint``, which stage 4 takes from a register of its own, ``u_ahead``) and the
        all-zero state's of a fresh entry (from the payload, the cycle before), so that stage 3
        only chooses; but for the entry the operation two ahead wrote (``hist[0]`` now), whose
        hint is worked out here from that register and taken by stage 4 from a register of
        its own (``u_late_hint``)."""
        m, table = self.m, self.table
        zero = Signal(table._update.hint_width, name="s3_zero_hint")
        with m.If(self.advance):
            m.d.sync += zero.eq(self.prepare(m, Const(0, table._state_width), s2.payload))
        if BREAK_FORWARDING == "stale hint":
            newest = [0] * len(newest)
        # the update's hint, the last to be known, is registered as it is made, and stage 4
        # takes it when the way found is the newest write's (``new``): that bit, and the hint
        # otherwise, are worked out here from registers (kept, as their own cones)
        new = Signal(name="s3_hint_new", attrs={"keep": 1})
        other = Signal(table._update.hint_width, name="s3_hint_other", attrs={"keep": 1})
        # the entry the operation two ahead wrote (``late``, the write stage 4 made when this
        # tuple was a cycle before stage 3) is in ``hist[0]`` now: its hint is worked out from
        # that register, and stage 4 takes it from a register of its own
        late = Signal(name="s3_hint_late", attrs={"keep": 1})
        later = self.payload_copy(s2.payload, t.payload, "s3_late_payload")
        if BREAK_FORWARDING == "late hint":
            later = s2.payload
        parts = [Mux(~_or_all(mine), zero, 0)]
        lates = []
        for b in range(self.banks):
            z, h0, from_read, read_hint, pre_hint = self.pre_hint[b]
            before = Mux(h0, self.h0_hint, Mux(from_read, read_hint, pre_hint))
            parts.append(Mux(mine[b] & ~newest[b] & ~z, before, 0))
            lates.append(mine[b] & ~newest[b] & z)
        m.d.comb += [
            new.eq(_or_all([mine[b] & newest[b] for b in range(self.banks)])),
            late.eq(_or_all(lates)),
            other.eq(_or_all(parts)),
        ]
        with m.If(self.advance):
            m.d.sync += [
                self.u_hint.eq(other),
                self.u_new.eq(new),
                self.u_ahead.eq(self.ahead_hint[0]),
                self.u_late.eq(late),
                self.u_late_hint.eq(self.prepare(m, self.hist0_copy("s3_late_state"), later)),
            ]

    def _stage3_early(self, t, mine, newest, new_state, pre_state):
        """``update.early`` of the state the tuple in stage 3 finds (PREV's comparisons' high
        bits), for stage 4 (``u_early``): worked out for each way's candidate, stage 4's new
        state and the all-zero state of a fresh entry, each registered as it is, with which
        of them is the state found (one-hot), and chosen after the register, in stage 4, so
        that no choice follows the comparisons in stage 3."""
        m, table = self.m, self.table
        early = self.early_fn
        if BREAK_FORWARDING == "early newest":
            newest = [0] * len(newest)
        fresh = ~_or_all(mine)
        made = _or_all([mine[b] & newest[b] for b in range(self.banks)])
        cands = [
            (fresh, early(m, Const(0, table._state_width), t.payload)),
            (made, early(m, new_state, t.payload)),
        ]
        cands += [
            (mine[b] & ~newest[b], early(m, pre_state[b], t.payload)) for b in range(self.banks)
        ]
        parts = []
        for c, (chosen, bits) in enumerate(cands):
            sel = Signal(name=f"s4_early_sel{c}")
            reg = Signal(len(bits), name=f"s4_early{c}")
            with m.If(self.advance):
                m.d.sync += [sel.eq(chosen), reg.eq(bits)]
            parts.append(Mux(sel, reg, 0))
        m.d.comb += self.u_early.eq(_or_all(parts))

    def _newest(self, prev, s2, s2_op, read, decided, rel):
        """The cycle before stage 3: per way the newest of the ``decided`` writes (store, way,
        state) to the operation's row, else the row read, registered: ``(pre_match, pre_live,
        pre_valid, pre_state)``; with ``update.prepare`` also its hint (:meth:`_newest_hint`)."""
        m, banks, width = self.m, self.banks, self.table._state_width
        rel_hint = rel[5]
        pre_match = Signal(banks, name="s2_pre_match")
        pre_live = Signal(banks, name="s2_pre_live")
        pre_valid = Signal(banks, name="s2_pre_valid")
        pre_state = [Signal(width, name=f"s2_pre_state{b}") for b in range(banks)]
        pre = [pre_match, pre_live, pre_valid, pre_state]
        if self.prepare is not None:
            self.pre_hint = []
            self._written_hint(s2)
        self.pre_match_next = []  # what pre_match is loaded with, for the copies of stage 3
        self.newest_rel = Signal(banks, name="s1_rel_way0")
        grouped = self._grouped_choice(width)
        for b, read_bits in enumerate(self._read_bits(prev, s2, s2_op, read)):
            read_state_bits = read_bits[3]
            cand = [
                Signal(name=f"s2_cand_match{b}"),
                Signal(name=f"s2_cand_live{b}"),
                Signal(name=f"s2_cand_valid{b}"),
                Signal(width, name=f"s2_cand_state{b}"),
            ]
            # a table spread over the device or with PREV's split comparisons (``spread``: but
            # with the windows' hints) takes the match, live and valid bits of its row read
            # through the last gate only: those of the newest write in flight per way, and
            # whether there is one, are worked out from registers apart (kept, as their own
            # cones), so that the route from a far block meets one gate before the registers
            # (``pre_match``'s among them, for stage 3's copies); with a wide state (more than
            # :data:`_WIDE_STATE` bits) stage 4's write (``newest_rel``, from stage 3's
            # decision) is kept out of them too and meets them in that gate (measured better at
            # both seeds for ``start_seq``, not for PREV's 42 bits:
            # benchmarks/PAPER_FIGURES.md); the state is chosen as before, the row read last in
            # the chain
            late = 3 if self.spread else 0
            apart = int(width > _WIDE_STATE)  # stage 4's write kept out of the forwarded bits
            forwarded = [
                Signal(name=f"s2_fwd_{n}{b}", attrs={"keep": 1})
                for n in ("match", "live", "valid")[:late]
            ]
            # with ``grouped``, this chain chooses the state's first group only, the others
            # theirs from copies of their own of the choice (:meth:`_grouped_states`)
            chain, head = cand, len(cand[3])
            if grouped:
                head = _STATE_CHUNK
                chain = [*cand[:3], cand[3][:head]]
                read_bits = (*read_bits[:3], read_bits[3][:head])
            # the forwarded bits in the state's chain, or with ``apart`` a chain of their own
            target = chain[late:] if apart else forwarded + chain[late:]
            chosen, bits = self._newest_chain(
                b, decided, rel, (cand, chain, target, read_bits), late, head if grouped else None
            )
            if late:
                self._forwarded_bits(b, chosen, bits, (cand, forwarded, read_bits), late, apart)
            if grouped:
                self._grouped_states(b, decided, cand[3], read_state_bits)
            self.pre_match_next.append(cand[0])
            with m.If(self.advance):
                m.d.sync += [reg[b].eq(c) for reg, c in zip(pre, cand, strict=True)]
            if self.prepare is not None:
                # the row read's state for its hint: a bank's spare copy, when it has one
                spare = getattr(self, "read_spare", None)
                read_state = read_state_bits if spare is None else spare[b]
                self.pre_hint.append(self._newest_hint(b, s2, chosen, read_state, rel_hint))
        return pre_match, pre_live, pre_valid, pre_state

    def _newest_chain(self, b, decided, rel, chains, late, head):
        """Way ``b``'s priority chain of the ``decided`` writes, newest first, into ``target``
        (the row read's bits in ``chain`` when none writes the way), each state cut to its
        first ``head`` bits when given: ``(chosen, bits)``, whether each write is to the way
        and its match, live and valid bits (the first ``late``)."""
        m = self.m
        cand, chain, target, read_bits = chains
        _, rel_key, rel_live, rel_valid, rel_way, _ = rel
        chosen, bits = [], []
        for j, (_, _, state) in enumerate(decided):
            if head is not None:
                state = state[:head]
            # the sources but the newest were compared a cycle before (rel_way), so this
            # priority chain starts from registers
            if rel_way[j] is not None:
                chosen.append(rel_way[j][b])
            else:
                # stage 4's write, decided in stage 3 the cycle before: whether it writes
                # this way of the operation's row is a register of its own, loaded with
                # that decision (``newest_rel``, :meth:`_stage3`)
                chosen.append(self.newest_rel[b])
            values = (rel_live[j] & rel_key[j], rel_live[j], rel_valid[j], state)
            bits.append(values[:late])
            with (m.If if j == 0 else m.Elif)(chosen[j]):
                m.d.comb += [
                    c.eq(v) for c, v in zip(target, values[len(cand) - len(target) :], strict=True)
                ]
        with m.Else():
            m.d.comb += [c.eq(v) for c, v in zip(chain[late:], read_bits[late:], strict=True)]
        return chosen, bits

    def _forwarded_bits(self, b, chosen, bits, signals, late, apart):
        """Way ``b``'s match, live and valid bits (the first ``late``) forwarded from the
        newest write in flight to the way, worked out apart (``forwarded``) and meeting the
        row read's in the last gate (with ``apart``, stage 4's write too)."""
        m = self.m
        cand, forwarded, read_bits = signals
        skip = int(apart and self._by_key())  # the match bit an OR (:meth:`_match_any`)
        for j in range(apart, len(chosen) if apart else 0):
            with (m.If if j == apart else m.Elif)(chosen[j]):
                m.d.comb += [c.eq(v) for c, v in zip(forwarded[skip:], bits[j][skip:], strict=True)]
        written = Signal(name=f"s2_fwd_any{b}", attrs={"keep": 1})
        m.d.comb += written.eq(_or_all(chosen[apart:]))
        if skip:
            m.d.comb += cand[0].eq(self._match_any(chosen, read_bits[0]))
        for c, v, f, r in zip(
            cand[skip:late], bits[0][skip:], forwarded[skip:], read_bits[skip:late], strict=True
        ):
            m.d.comb += c.eq(Mux(chosen[0], v, Mux(written, f, r)) if apart else Mux(written, f, r))

    def _written_hint(self, s2) -> None:
        """:meth:`_newest`'s hint of the write handed on last (``hist[0]``, stage 4's the cycle
        before), worked out from its register for the operation the cycle before stage 3
        (``h0_hint``)."""
        m = self.m
        self.h0_hint = Signal(self.table._update.hint_width, name="s2_h0_hint")
        later = self.s2_copy(s2, "s2_h0_payload")
        if BREAK_FORWARDING == "written hint":
            later = self.s3_payload
        with m.If(self.advance):
            m.d.sync += self.h0_hint.eq(self.prepare(m, self.hist0_copy("s2_h0_state"), later))

    def payload_copy(self, source, payload, name):
        """A copy of its own of ``payload``, a register loaded with ``source`` as it is (a
        stage before), for one set of comparisons with it (beside a bank's blocks, the row
        read's; the windows' hints of the writes in flight: each its own, so that no register
        of the tuple's times drives them all) (:func:`~nfacep.hdl.bram.register_copy`)."""
        q = register_copy(self.m, self.platform, Value.cast(source), self.advance, name)
        shape = payload.shape()
        return data.View(shape, q) if isinstance(shape, data.Layout) else q

    def hist0_copy(self, name):
        """A copy of the state ``hist[0]`` holds (loaded as it is, from stage 4's write), for
        one set of the windows' comparisons."""
        return register_copy(self.m, self.platform, self.written.state, self.advance, name)

    def s2_copy(self, s2, name):
        """A copy of the payload of the operation before stage 3 (``s2``)."""
        return self.payload_copy(self.prev_payload, s2.payload, name)

    def _newest_hint(self, b, s2, chosen, read_state, rel_hint):
        """The hint of way ``b``'s candidate for the operation in ``s2``, in registers that
        stage 3 chooses among (no comparison before a choice in one cycle): ``(z, h0,
        from_read, read_hint, hint)``: whether stage 4's write is the newest to the way (its
        hint is worked out in stage 3, :meth:`_stage3_hint`), else whether ``hist[0]`` is
        (its hint is ``h0_hint``, worked out now from that register), else whether none is
        (the row read's, worked out now from the registered row), else the newest of the
        others' (``rel_hint``, registers)."""
        m, width = self.m, self.table._update.hint_width
        regs = (
            Signal(name=f"s2_hint_z{b}"),
            Signal(name=f"s2_hint_h0{b}"),
            Signal(name=f"s2_hint_read{b}"),
            Signal(width, name=f"s2_read_hint{b}"),
            Signal(width, name=f"s2_pre_hint{b}"),
        )
        hint = Signal(width, name=f"s2_cand_hint{b}")
        for j in range(2, len(chosen)):
            with (m.If if j == 2 else m.Elif)(chosen[j]):
                m.d.comb += hint.eq(rel_hint[j])
        with m.If(self.advance):
            m.d.sync += [
                regs[0].eq(chosen[0]),
                regs[1].eq(~chosen[0] & chosen[1]),
                regs[2].eq(~_or_all(chosen)),
                regs[3].eq(self.prepare(m, read_state, self.s2_copy(s2, f"s2_payload{b}"))),
                regs[4].eq(hint),
            ]
        return regs

    def _stage3(self, t, t_valid, t_op, t_row, t_bank, s2, s2_op, s2_row, pre, last):
        """Stage 3: the write decided last cycle (``last``: stage 4's store, way and new
        state) may still replace what ``pre`` holds; decide. Returns ``(hit, dropped, way,
        store, found)``, ``found`` the state the tuple finds."""
        m, width = self.m, self.table._state_width
        pre_match, pre_live, pre_valid, pre_state = pre
        _, _, new_state = last  # stage 4's store and way: from the copies below
        key = Value.cast(t.key).as_unsigned()
        s2_key = Value.cast(s2.key).as_unsigned()
        row_same0 = Signal(name="s3_row_same0")
        same_key0 = Signal(name="s3_same_key0")
        live0 = Signal(name="s3_live0")
        valid0 = Signal(name="s3_valid0")
        # stage 3's row and key against the next operation's, compared a cycle before
        row_next, key_next = self._next_relation(key, t_row, s2_key, s2_row)
        with m.If(self.advance):
            m.d.sync += [
                row_same0.eq(row_next),
                same_key0.eq(key_next),
                live0.eq(self.live(~t_op.sweep, t_op.now, s2_op, ahead=1)),
                valid0.eq(~t_op.sweep),
            ]
        matches = Signal(self.banks, name="s3_matches")
        live = Signal(self.banks, name="s3_live")
        valid = Signal(self.banks, name="s3_entry_valid")
        newest_ways = Signal(self.banks, name="s3_newest")  # row_same0 & u_store & (u_way == b)
        ways_found, ways_mine, ways_newest = [], [], []
        for b in range(self.banks):
            newest = newest_ways[b]
            m.d.comb += [
                matches[b].eq(Mux(newest, live0 & same_key0, pre_match[b])),
                live[b].eq(Mux(newest, live0, pre_live[b])),
                valid[b].eq(Mux(newest, valid0, pre_valid[b])),
            ]
            # the state the tuple finds: an AND-OR over the ways, as at most one way matches
            # (it does not wait for `way`)
            mine = matches[b] & (t_bank == b) if self.direct else matches[b]
            ways_found.append(Mux(mine, Mux(newest, new_state, pre_state[b]), 0))
            ways_mine.append(mine)
            ways_newest.append(newest)
        if self.prepare is not None:
            self._stage3_hint(t, s2, ways_mine, ways_newest)
        if self.early_fn is not None:
            self._stage3_early(t, ways_mine, ways_newest, new_state, pre_state)
        hit, dropped, way = self.decide(key, t_bank, matches, ~live, "s3")
        store3, way3 = self.operation(t_valid, t_op, t_bank, dropped, way, valid & ~live)
        newest_now = Cat(row_next & store3 & (way3 == b) for b in range(self.banks))
        newest_rel = self._newest_relation(t_row, s2_row, store3, way3)
        with m.If(self.advance):  # from stage 3's decision, a register of its own
            m.d.sync += [newest_ways.eq(newest_now), self.newest_rel.eq(newest_rel)]
        found = Signal(width, name="s3_found")
        if width <= _STATE_CHUNK:
            m.d.comb += found.eq(_or_all(ways_found))
            return hit, dropped, way3, store3, found
        # a wide state: chosen in groups (the same inputs, loaded on the same edges)
        written = row_next & store3
        ours = key_next & self.live(~t_op.sweep, t_op.now, s2_op, ahead=1)
        taken = row_next & ours & (1 if BREAK_FORWARDING == "found bubble" else t_valid)
        self._found_groups(found, (written, ours, way3), taken, new_state, pre_state)
        return hit, dropped, way3, store3, found

    def _next_relation(self, key, t_row, s2_key, s2_row):
        """Whether stage 3's operation and the one a stage before it (``s2``) have the same
        row and the same key, each a register of its own loaded with the comparison of the
        two operations a stage before (``s2`` and ``prev``), so that what is loaded from them
        (``row_same0``, ``same_key0``, their copies for each group of a wide state, the
        ``newest`` bits) comes from a register and no comparison (``BREAK_FORWARDING = "next
        relation"``: loaded with the two operations' a stage ahead instead)."""
        m = self.m
        row_next = Signal(name="s3_row_next")
        key_next = Signal(name="s3_key_next")
        earlier = (s2_row, self.prev_row, s2_key, self.prev_key)
        if BREAK_FORWARDING == "next relation":  # the two operations a stage ahead
            earlier = (t_row, s2_row, key, s2_key)
        row, row_before, key, key_before = earlier
        with m.If(self.advance):
            m.d.sync += [
                row_next.eq(row == row_before),
                key_next.eq(self.tag_equal(key, key_before)),
            ]
        return row_next, key_next

    def _newest_relation(self, t_row, s2_row, store3, way3):
        """What ``newest_rel`` is loaded with: for the operation entering s2, which meets
        stage 3's write in :meth:`_newest` a cycle later, whether that write goes to each way
        of its row (their rows compared the cycle before, when a read register holds the
        operation before ``prev``)."""
        m = self.m
        same_row = Signal(name="s3_row_same_prev")
        if BREAK_FORWARDING == "newest relation":
            m.d.comb += same_row.eq(t_row == s2_row)
        elif self.early_row is None:
            m.d.comb += same_row.eq(t_row == self.prev_row)
        else:
            with m.If(self.advance):
                m.d.sync += same_row.eq(s2_row == self.early_row)
        return Cat(same_row & store3 & (way3 == b) for b in range(self.banks))
