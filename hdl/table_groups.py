"""The choice of a wide state in groups (:class:`GroupedChoice`, a base of
:class:`~nfacep.hdl.table_forwarding.Forwarding`): a state wider than a group is chosen in
groups of bits, each from copies of its own of the registers its choice is made of, so that no
one register drives the multiplexers of every bit; in a hashed table without timers, a wide
state's match bits and the state found are chosen by key alone."""

from __future__ import annotations

from amaranth.hdl import Cat, Mux, Value

from .bram import register_copy

__all__ = ["GroupedChoice"]


class GroupedChoice:
    """The grouped choices of the registered stages' forwarding (set up by
    :class:`~nfacep.hdl.table_forwarding.Forwarding`: ``m``, ``table``, ``banks``, ``direct``,
    ``timers``, ``advance``, the relations and the copies' sources, and ``_broken``: whether
    the test-only ``BREAK_FORWARDING`` breaks a path)."""

    def _by_key(self) -> bool:
        """Whether a way's match bit and the state found are chosen by key alone: a wide state
        in a hashed table without timers that takes its row read's match bits through the last
        gate (``spread``: :meth:`_match_any`, :meth:`_found_by_key`)."""
        wide = self.table._state_width > _WIDE_STATE
        return self.spread and wide and not self.direct and not self.timers

    def _match_any(self, chosen, read):
        """A way's match bit in a hashed table without timers: whether the row read or any
        write in flight to the way (``chosen``, stage 4's first) holds the tuple's key, live
        (``s1_rel_match``, registered with the relations), an OR and no priority chain: an
        entry changes key only when it ages out, and a way is taken only while it is free, so
        every write to a way of a row since it was taken, and the block's entry once it holds
        one, carry the same key (``BREAK_FORWARDING = "match any"``: the older writes in
        flight left out of the OR). The writes' part and the row read's are kept apart too
        (``match_parts``), for the copies of :meth:`_found_groups`."""
        terms = [c & self.rel_match[j] for j, c in enumerate(chosen)]
        if self._broken("match any"):
            terms = terms[:1]
        written = _or_all(terms)
        self.match_parts.append((written, *self.read_halves[len(self.match_parts)]))
        return written | read

    def _grouped_choice(self, width) -> bool:
        """Whether :meth:`_newest` chooses each way's candidate state in groups of
        :data:`_STATE_CHUNK` bits, each group from copies of its own of the older writes'
        relations (``rel_way``, loaded as those are), so that no one register of them drives
        the multiplexers of every bit: with timers and the windows' hints, a state wider than
        a group (the window's with timers at 4,096 entries: measured better at both seeds,
        benchmarks/PAPER_FIGURES.md), its row read not taken through the last gate; and a
        wide state chosen by key (:meth:`_by_key`)."""
        windows = self.timers and self.prepare is not None and not self.spread
        return (windows and _STATE_CHUNK < width <= _WIDE_STATE) or self._by_key()

    def _grouped_states(self, b, decided, cand_state, read_state) -> None:
        """Way ``b``'s candidate state but its first group (chosen in :meth:`_newest`'s chain):
        each group of :data:`_STATE_CHUNK` bits the newest of the ``decided`` writes to the
        way, else the row read, chosen in a chain of its own: stage 4's write from
        ``newest_rel`` (shared), the older writes from copies of their ``rel_way`` bits for
        the way (:func:`~nfacep.hdl.bram.register_copy`, loaded as those are;
        ``BREAK_FORWARDING = "way groups"``: loaded from those registers, a cycle late)."""
        m, width = self.m, len(cand_state)
        loaded = self.rel_way if self._broken("way groups") else self.rel_way_next
        older = Cat(bits[b] for bits in loaded if bits is not None)
        for g, lo in enumerate(range(_STATE_CHUNK, width, _STATE_CHUNK), start=1):
            hi = min(width, lo + _STATE_CHUNK)
            copy = register_copy(m, self.platform, older, self.advance, f"s1_rel_way_g{g}_{b}")
            chosen = [self.newest_rel[b], *copy]
            for j, (_, _, state) in enumerate(decided):
                with (m.If if j == 0 else m.Elif)(chosen[j]):
                    m.d.comb += cand_state[lo:hi].eq(state[lo:hi])
            with m.Else():
                m.d.comb += cand_state[lo:hi].eq(read_state[lo:hi])

    def _found_groups(self, found, decision, taken, new_state, pre_state):
        """A wide state found, chosen in groups of :data:`_STATE_CHUNK` bits (of
        :data:`_WIDE_CHUNK` for a state wider than :data:`_WIDE_STATE`, of :data:`_KEY_CHUNK`
        for one chosen by key), each from copies of its own of the registers the choice is
        made of, so that no one register drives the multiplexers of every bit. ``decision``
        is what they are loaded with: stage 4's write going to the tuple's row and its being
        the tuple's key, each one bit combined as it is loaded, and stage 3's way: at most one
        way is stage 4's, so the state found is stage 4's new one, or else the OR of the ways
        the tuple's key is found in that stage 4 does not overwrite (a gate per way and two
        per bit); chosen by key, ``taken`` and the ways' match bits in parts
        (:meth:`_found_by_key`)."""
        m, width = self.m, len(found)
        sources = (*decision, Cat(self.pre_match_next), self.s2_bank)
        by_key = self._by_key()
        if by_key:  # :meth:`_found_by_key`
            # the row read's match bits (its tag compared in halves) and the writes' apart,
            # put together after the copies, so that the route from a far block passes no gate
            # after its comparison
            sources = (taken, *(Cat(p[i] for p in self.match_parts) for i in (1, 2, 0)))
        size = _WIDE_CHUNK if width > _WIDE_STATE else _STATE_CHUNK
        if by_key:
            size = _KEY_CHUNK
        for k, lo in enumerate(range(0, width, size)):
            hi = min(width, lo + size)
            q = register_copy(m, self.platform, Cat(*sources), self.advance, f"s3_choice{k}")
            parts, at = [], 0
            for source in sources:
                parts.append(q[at : at + len(Value.cast(source))])
                at += len(Value.cast(source))
            if by_key:
                m.d.comb += found[lo:hi].eq(self._found_by_key(parts, new_state, pre_state, lo, hi))
                continue
            written, ours, uw, pm, tb = parts
            if self.direct:  # the tuple's own bank only
                written = written & (uw == tb)
                pm = pm & Cat(tb == b for b in range(self.banks))
            chunk = [Mux(written & ours, new_state[lo:hi], 0)]
            for b in range(self.banks):
                kept = pm[b] & ~(written & (uw == b))
                chunk.append(Mux(kept, pre_state[b][lo:hi], 0))
            m.d.comb += found[lo:hi].eq(_or_all(chunk))

    def _found_by_key(self, parts, new_state, pre_state, lo, hi):
        """Bits ``lo`` to ``hi`` of a wide state found in a hashed table without timers, from a
        group's copies of registers, stage 4's operation being a tuple of the tuple's key
        (``wo``, loaded with ``taken``) and the ways' match bits (the row read's and the writes
        in flight's, :meth:`_match_any`), and not of stage 3's decision
        (its way, whether it stores). Stage 4's operation decided with every write the tuple's
        ways were chosen from (stage 4's is ``newest_rel``'s, which the match bits take), and a
        key is stored at most once, so a way it writes in which the tuple's key is found is the
        tuple's entry (an entry changes key only when it ages out), and when it writes the
        tuple's entry no other way holds the key: the state found is stage 4's new one, or else
        the OR of the ways the key is found in. When stage 4's operation was dropped, the
        tuple sees the same bucket, full and without its key, and is dropped too: the state
        it finds is never stored, its result never kept (``BREAK_FORWARDING = "found
        overwritten"``: the ways' OR even when stage 4 writes the entry; ``"found bubble"``:
        stage 4's new state even when stage 4 holds no operation, a key compared all the
        same; ``"read halves"``: the row read's match the low half of its tag's comparison
        only)."""
        wo, low, high, written = parts
        pm = (low if self._broken("read halves") else low & high) | written
        kept = pm if self._broken("found overwritten") else pm & ~wo.replicate(len(pm))
        chunk = [Mux(wo, new_state[lo:hi], 0)]
        chunk += [Mux(kept[b], pre_state[b][lo:hi], 0) for b in range(self.banks)]
        return _or_all(chunk)


#: Stage 3 of a state wider than this chooses the state found in groups of this many bits, each
#: from its own copies of the registers the choice is made of.
_STATE_CHUNK = 24

#: A state wider than this (``start_seq``'s 351 bits) chooses in groups of :data:`_WIDE_CHUNK`
#: bits instead: measured better at both seeds for ``start_seq`` at 4,096 entries (the window's
#: 119 bits and PREV's 42 were measured in groups of 24; benchmarks/PAPER_FIGURES.md).
_WIDE_STATE = 192
_WIDE_CHUNK = 16

#: A wide state chosen by key (:meth:`GroupedChoice._by_key`) chooses the state found in groups
#: of this many bits: its groups' copies hold fewer bits, loaded from fewer gates (measured
#: better than 16 at both seeds for ``start_seq`` at 4,096 and 8,192 entries:
#: benchmarks/PAPER_FIGURES.md).
_KEY_CHUNK = 32


def _or_all(values):
    result = values[0]
    for value in values[1:]:
        result = result | value
    return result
