"""The SDRAM store's cache lookup (:class:`CacheLookup`, a base of
:class:`~nfacep.hdl.sdram.store.SdramPartitioner`): the cache's tags in block RAM and the
queued tuples' lines in registers (:class:`LineTags`), the tag check over stages 2 and 3 with
stage 3's allocations forwarded, and the users of a line (the queued tuples that name it) that
keep it from being taken from under them."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib.memory import Memory

__all__ = ["CacheLookup", "LineTags"]


class LineTags:
    """The cache's tags and its users. Per line, in block RAM (``memory``): the bucket it
    holds (its bits above the line's index, which are the rest) and ``valid``; written only
    by stage 3's allocations (and cleared after reset), read by stage 1 into stage 2. Per
    tuple queued, in registers beside the store's tuple queue and in its order (a shadow of
    it: ``queue`` entries, written as a tuple joins, freed as the head hands it on): its line
    and whether that line's words have arrived (``filled``). A line has users while a queued
    tuple names it: what keeps it from being taken from under them."""

    def __init__(self, m: Module, lines: int, bucket_bits: int, queue: int):
        self.lines = lines
        #: the bucket a line holds is the line's index in its low bits: only the rest is kept
        self.low = (lines - 1).bit_length()
        self.tag_bits = bucket_bits - self.low
        m.submodules.tags = self.memory = Memory(shape=self.tag_bits + 1, depth=lines, init=[])
        self.read_port = self.memory.read_port()
        self.write_port = self.memory.write_port()
        line_bits = max(1, self.low)
        self.queue = queue
        self.q_line = [Signal(line_bits, name=f"queued{i}_line") for i in range(queue)]
        self.q_valid = [Signal(name=f"queued{i}_valid") for i in range(queue)]
        self.q_filled = [Signal(name=f"queued{i}_filled") for i in range(queue)]
        self.q_in = Signal(range(queue), name="queued_in")
        self.q_out = Signal(range(queue), name="queued_out")

    def tag(self) -> tuple[Value, Value]:
        """The tag read (the bucket's high bits, valid): the read port's output."""
        return self.read_port.data[1:], self.read_port.data[0]

    def busy(self, line: Value) -> Value:
        """1 when a queued tuple waits for ``line`` (its users: a comparison per tuple)."""
        return Cat(v & (q == line) for v, q in zip(self.q_valid, self.q_line, strict=True)).any()

    def head_filled(self) -> Value:
        """Whether the queue's head's line has its words."""
        return Array(self.q_filled)[self.q_out]

    def drive(self, m: Module, enter, done, fill, clearing) -> None:
        """``enter``: stage 3's (go, line, allocate, bucket); ``done``: the head hands its
        tuple on; ``fill``: (line, filled), the last word of ``line`` lands; ``clearing``:
        the store clears after reset (every tag written invalid meanwhile)."""
        go, line, allocate, bucket = enter
        filled_line, filled = fill
        w = self.write_port
        index = Signal(range(self.lines), name="tags_cleared")
        with m.If(clearing):
            m.d.comb += [w.addr.eq(index), w.data.eq(0), w.en.eq(1)]
            m.d.sync += index.eq(index + 1)  # (wraps: lines are a power of two)
        with m.Else():
            m.d.comb += [
                w.addr.eq(line),
                w.data.eq(Cat(Const(1, 1), bucket[self.low :])),
                w.en.eq(allocate),
            ]
        # a tuple that joins a line whose fetch is on its way waits for it, as the line's
        # other users do; one that joins a line no tuple waits for finds it filled
        waiting = Cat(
            v & ~f & (q == line)
            for v, f, q in zip(self.q_valid, self.q_filled, self.q_line, strict=True)
        ).any()
        arrives = filled & (filled_line == line)
        for i in range(self.queue):
            with m.If(go & (self.q_in == i)):
                m.d.sync += [
                    self.q_valid[i].eq(1),
                    self.q_line[i].eq(line),
                    self.q_filled[i].eq(~allocate & (~waiting | arrives)),
                ]
            with m.Else():
                with m.If(done & (self.q_out == i)):
                    m.d.sync += self.q_valid[i].eq(0)
                with m.If(filled & (self.q_line[i] == filled_line)):
                    m.d.sync += self.q_filled[i].eq(1)
        for pointer, step in ((self.q_in, go), (self.q_out, done)):
            with m.If(step):
                m.d.sync += pointer.eq(Mux(pointer == self.queue - 1, 0, pointer + 1))


class CacheLookup:
    """Stages 2 and 3 of a :class:`~nfacep.hdl.sdram.store.SdramPartitioner` (which sets the
    settings these read)."""

    def _lookup(self, m: Module, tags, s1_stage, take: Signal, line_bits: int):
        """Stages 2 and 3: the tag check. Stage 2 has the tag of stage 1's line (the bucket
        it holds and whether it is valid), read from the tag memory and registered on the way
        (:meth:`_tag_read`); stage 3 registers the comparison of that tag with the tuple's
        bucket, ``holds``, and decides. Only stage 3 allocates lines, so a tag read stays
        true while its tuple waits, but for stage 3's own allocations, which are registered
        beside the read and forwarded into stage 2's comparison. Returns stage 3's (tuple,
        valid, bucket, tick, line, holds, old bucket, old valid) and its ``go`` and
        ``allocate`` (driven by the caller)."""
        s1_bucket = s1_stage[2]
        go, allocate = Signal(name="s3_go"), Signal(name="s3_allocate")
        t = Signal.like(s1_stage[0], name="s3")
        t_valid = Signal(name="s3_valid")
        t_bucket = Signal.like(s1_bucket, name="s3_bucket")
        t_now = Signal.like(s1_stage[3], name="s3_now")
        t_line = Signal(line_bits, name="s3_line")
        t_holds = Signal(name="s3_holds")
        move3 = Signal(name="s3_move")
        m.d.comb += move3.eq(~t_valid | go)
        stage2 = self._tag_read(
            m, tags, s1_stage, take, line_bits, move3, (allocate, t_line, t_bucket)
        )
        u, u_valid, u_bucket, u_now, u_line, tag, tag_valid = stage2
        gives_u_line = Signal(name="s3_gives_s2_line")
        m.d.comb += gives_u_line.eq(allocate & (t_line == u_line))
        # (stage 3 allocates only when it takes stage 2's tuple, which then leaves stage 2)
        # stage 2 compares the line's tag now (stage 3's allocations of it forwarded) with its
        # bucket; stage 3 keeps that tag, the bucket a job writes back if it takes the line
        # (the comparisons made before stage 3's allocation, late in the clock, chooses)
        holds = Signal(name="s2_holds")
        m.d.comb += holds.eq(Mux(gives_u_line, t_bucket == u_bucket, tag_valid & (tag == u_bucket)))
        t_old = Signal.like(s1_bucket, name="s3_old")
        t_old_valid = Signal(name="s3_old_valid")
        with m.If(move3):
            m.d.sync += [
                t_valid.eq(u_valid),
                t.eq(u),
                t_bucket.eq(u_bucket),
                t_now.eq(u_now),
                t_line.eq(u_line),
                t_holds.eq(holds),
                t_old.eq(Mux(gives_u_line, t_bucket, tag)),
                t_old_valid.eq(gives_u_line | tag_valid),
            ]
        s3 = (t, t_valid, t_bucket, t_now, t_line, t_holds, t_old, t_old_valid)
        self._moves = (move3, u_line, t_line)
        return s3, go, allocate

    def _tag_read(self, m: Module, tags, s1_stage, take, line_bits, move3, allocation):
        """Stage 1's line's tag read from the tag memory as its tuple moves into stage 2r, and
        the memory's output registered as it moves on into stage 2 (the block RAM's output
        goes straight into a register: nothing else on that path). Stage 3's allocations of
        the line in the clock of the read and in the clock of the move to stage 2 are
        registered beside it (``given``: the memory's read does not see its write). Returns
        stage 2's (tuple, valid, bucket, tick, line, tag now, tag valid now): the tag with
        those allocations applied, as a whole bucket."""
        s1, s1_valid, s1_bucket, s1_now = s1_stage
        allocate, t_line, t_bucket = allocation
        line = s1_bucket[:line_bits] if self._lines > 1 else Const(0, 1)
        stages = {}
        for name in ("s2r", "s2"):
            stages[name] = {
                "tuple": Signal.like(s1, name=name),
                "valid": Signal(name=f"{name}_valid"),
                "bucket": Signal.like(s1_bucket, name=f"{name}_bucket"),
                "now": Signal.like(s1_now, name=f"{name}_now"),
                "line": Signal(line_bits, name=f"{name}_line"),
                "given": Signal(name=f"{name}_given"),  # its line given away after the read
                "given_bucket": Signal.like(s1_bucket, name=f"{name}_given_bucket"),
                "move": Signal(name=f"{name}_move"),
            }
        r, u = stages["s2r"], stages["s2"]
        m.d.comb += [
            u["move"].eq(~u["valid"] | move3),
            r["move"].eq(~r["valid"] | u["move"]),
            take.eq(~s1_valid | r["move"]),
        ]
        # the tag memory's read port loads as stage 2r does: its output is stage 2r's tag
        tag_read, tag_read_valid = tags.tag()
        m.d.comb += [tags.read_port.addr.eq(line), tags.read_port.en.eq(r["move"])]
        u_tag = Signal(tags.tag_bits, name="s2_tag")  # the bucket's bits above the line's
        u_tag_valid = Signal(name="s2_tag_valid")
        with m.If(r["move"]):
            m.d.sync += [
                r["valid"].eq(s1_valid),
                r["tuple"].eq(s1),
                r["bucket"].eq(s1_bucket),
                r["now"].eq(s1_now),
                r["line"].eq(line),
                r["given"].eq(allocate & (t_line == line)),
                r["given_bucket"].eq(t_bucket),
            ]
        gives_r_line = allocate & (t_line == r["line"])
        with m.If(u["move"]):
            m.d.sync += [
                u["valid"].eq(r["valid"]),
                u["tuple"].eq(r["tuple"]),
                u["bucket"].eq(r["bucket"]),
                u["now"].eq(r["now"]),
                u["line"].eq(r["line"]),
                u["given"].eq(r["given"] | gives_r_line),
                u["given_bucket"].eq(Mux(gives_r_line, t_bucket, r["given_bucket"])),
                u_tag.eq(tag_read),
                u_tag_valid.eq(tag_read_valid),
            ]
        tag = Signal.like(s1_bucket, name="s2_tag_now")
        tag_valid = Signal(name="s2_tag_now_valid")
        m.d.comb += [
            tag.eq(Mux(u["given"], u["given_bucket"], Cat(u["bucket"][: tags.low], u_tag))),
            tag_valid.eq(u["given"] | u_tag_valid),
        ]
        return u["tuple"], u["valid"], u["bucket"], u["now"], u["line"], tag, tag_valid

    def _free(self, m: Module, tags, free: Signal, go: Signal) -> None:
        """Load ``free`` with whether stage 3's line has no users (no queued tuple waits for
        it) after this clock: for stage 2's line when stage 3 takes its tuple (stage 3's own
        joining that line in the same clock counted), else for stage 3's. A tuple leaving in
        the clock is still counted: the line is seen free a clock later, never early."""
        move3, u_line, t_line = self._moves
        with m.If(move3):
            m.d.sync += free.eq(~tags.busy(u_line) & ~(go & (t_line == u_line)))
        with m.Else():
            m.d.sync += free.eq(~tags.busy(t_line))
