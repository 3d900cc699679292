"""What the pipeline store's update takes from the element that moves into its last stage,
worked out a stage or two ahead (:class:`PipelineHints`, a part of the swap pipeline of
:class:`~nfacep.hdl.partitioner.StreamPartitioner`): the windows' hint, PREV's bits and the
high bits of PREV's split comparisons, registered as the token moves, so that the last stage
compares nothing (hdl/PARTITIONER.md)."""

from __future__ import annotations

from amaranth.hdl import Const, Mux, Signal

__all__ = ["BREAK_HINT", "PipelineHints"]

#: Test-only: what the update takes from the element a stage before it (the windows' hint,
#: PREV's bits) broken on purpose, so that the tests show they catch it. ``"unswapped"``: the
#: hint registered for the last stage is always that of the element at the last stage before
#: the swap, even when the swap moves the one before it there. ``"prev following"``: PREV's
#: bits registered for a tuple that finds its element are always those of the element at the
#: last stage before the swap; ``"prev fresh"``: those of the element the swap moves into the
#: last stage even for a tuple that starts a new partition (whose history is empty). ``"prev
#: early unswapped"``: the high bits of PREV's split comparisons registered two stages before
#: the last for the element the swap moves ahead are always those of the element ahead of the
#: token's candidate; ``"prev early unwritten"``: those of the last stage's element always as
#: it is before the last stage writes it back. ``None`` (always, outside those tests): nothing
#: broken.
BREAK_HINT: str | None = None


class PipelineHints:
    """The hints of the swap pipeline (a mixin: its registers, elements, tokens and update are
    the pipeline's)."""

    def hint_ahead(self) -> None:
        """With ``update.prepare`` or ``update.prev`` and ``depth >= 2``: what the update takes
        from the element that moves into the last stage, against the token that moves with it,
        worked out at stage ``last - 1`` for both elements the swap chooses from and registered
        as it moves (``last_hint``: the windows' hint; ``last_prev``: PREV's bits, the all-zero
        state's when the token finds no element of its key), so that the update compares
        nothing. Exact because tokens are at least two stages apart (one tuple every other
        cycle): while a token is at stage ``last - 1`` the last stage holds none, so
        ``pe[last]`` is already what the token before it wrote back, and nothing else writes
        it before the token reaches the last stage; a stall holds every register, these too."""
        m, part, last = self.m, self.part, self.last
        if self.depth < 2:
            return
        stage = last - 1
        token = self.tokens[stage]
        candidate, following = self.elements[stage].state, self.elements[last].state
        prepare = getattr(part._update, "prepare", None)
        if prepare is not None:
            hints = prepare(m, candidate, token.payload), prepare(m, following, token.payload)
            swap = Const(0, 1) if BREAK_HINT == "unswapped" else self.swaps[stage]
            self.last_hint = Signal(part._update.hint_width, name="last_hint")
            with m.If(self.advance):
                m.d.sync += self.last_hint.eq(Mux(swap, *hints))
        prev = getattr(part._update, "prev", None)
        if prev is not None:
            # the last stage's candidate_hit, as look_up registers it: the token's element is
            # pe[stage] if that holds its key, else pe[last] if that does
            mine = self.candidate_hit[stage]
            found = mine | self.following_hit[stage]
            if BREAK_HINT == "prev following":
                mine = Const(0, 1)
            elif BREAK_HINT == "prev fresh":
                found = Const(1, 1)
            zero = Const(0, part.state_width)
            states = (candidate, following, zero)
            # a comparison wider than SPLIT_LOW bits (``update.early``) compares only its low
            # bits here: its high bits' order comes from a stage before (early_ahead), or with
            # no stage before this one but the head register, from beside them
            split = getattr(part._update, "early", None)
            early: list = [None, None, None]
            if split is not None and self.depth >= 3:
                width = part._update.early_width
                self.prev_early = (
                    Signal(width, name="prev_early_candidate"),
                    Signal(width, name="prev_early_following"),
                )
                early = [*self.prev_early, split(m, zero, token.payload)]
            elif split is not None:
                early = [split(m, state, token.payload) for state in states]
            bits = [
                prev(m, state, token.payload, early=e)
                for state, e in zip(states, early, strict=True)
            ]
            self.last_prev = Signal(part._update.prev_width, name="last_prev")
            with m.If(self.advance):
                m.d.sync += self.last_prev.eq(Mux(found, Mux(mine, bits[0], bits[1]), bits[2]))

    def early_ahead(self) -> None:
        """With ``update.early`` and ``depth >= 3``: the high bits of PREV's split comparisons
        (``update.early``) for the two elements stage ``last - 1`` will choose from, worked out
        while the token is at stage ``last - 2`` and registered as it moves (``prev_early``),
        so that :meth:`hint_ahead` compares only the low bits. Exact for the same reason: no
        token is at stage ``last - 1`` then, so ``pe[last - 1]`` will be what this token's
        swap moves ahead (``pe[last - 2]`` or ``pe[last - 1]``), and ``pe[last]`` what the
        last stage writes back now (the new state if a tuple there is not dropped, else the
        element as it is); nothing else writes either before the token reaches stage
        ``last - 1``."""
        if self.prev_early is None:
            return
        m, part, last = self.m, self.part, self.last
        assert self.last_new_state is not None
        stage = last - 2
        token = self.tokens[stage]
        split = part._update.early
        here, after = self.elements[stage].state, self.elements[stage + 1].state
        unchanged = self.elements[last].state
        moved = (split(m, here, token.payload), split(m, after, token.payload))
        kept = (split(m, self.last_new_state, token.payload), split(m, unchanged, token.payload))
        swap = Const(0, 1) if BREAK_HINT == "prev early unswapped" else self.swaps[stage]
        written = self.token_valid[last] & ~self.last_dropped
        if BREAK_HINT == "prev early unwritten":
            written = Const(0, 1)
        candidate, following = self.prev_early
        with m.If(self.advance):
            m.d.sync += [candidate.eq(Mux(swap, *moved)), following.eq(Mux(written, *kept))]
