"""The SDRAM store's cache lookup (:class:`CacheLookup`, a base of
:class:`~nfacep.hdl.sdram.store.SdramPartitioner`): the cache's tags in registers
(:class:`LineTags`), the tag check over stages 2 and 3 with stage 3's allocations forwarded,
and the count of each line's users that keeps a line from being taken from under a queued
tuple."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value

__all__ = ["CacheLookup", "LineTags"]


class LineTags:
    """The cache's tags, in registers: per line the bucket it holds, ``valid``, ``filled``,
    ``dirty`` and ``users`` (tuples queued for it)."""

    def __init__(self, m: Module, lines: int, bucket_bits: int, queue: int):
        self.lines = lines
        #: the bucket a line holds is the line's index in its low bits: only the rest is kept
        self.low = (lines - 1).bit_length()
        self.bucket = Array(
            Signal(bucket_bits - self.low, name=f"line{i}_bucket") for i in range(lines)
        )
        self.valid = Array(Signal(name=f"line{i}_valid") for i in range(lines))
        self.filled = Array(Signal(name=f"line{i}_filled") for i in range(lines))
        self.dirty = Array(Signal(name=f"line{i}_dirty") for i in range(lines))
        self.users = Array(Signal(range(queue + 2), name=f"line{i}_users") for i in range(lines))

    @staticmethod
    def read(values: Array, line: Value) -> Value:
        """``values[line]`` as a tree of multiplexers on the line's bits (a word chosen among
        them all), not a comparison of the line with every index: the input's read of its
        line's tag and count, the store's longest path."""
        width = len(values[0])
        return Cat(*values).word_select(line, width) if width else Const(0, 0)

    def drive(self, m: Module, enter, leave, filled_line, filled) -> None:
        go, line, allocate, bucket = enter
        done, head_line, wrote = leave
        for i in range(self.lines):
            inc = go & (line == i)
            dec = done & (head_line == i)
            with m.If(inc & ~dec):
                m.d.sync += self.users[i].eq(self.users[i] + 1)
            with m.Elif(dec & ~inc):
                m.d.sync += self.users[i].eq(self.users[i] - 1)
            with m.If(allocate & (line == i)):
                m.d.sync += [
                    self.bucket[i].eq(bucket[self.low :]),
                    self.valid[i].eq(1),
                    self.filled[i].eq(0),
                    self.dirty[i].eq(0),
                ]
            with m.Else():
                with m.If(filled & (filled_line == i)):
                    m.d.sync += self.filled[i].eq(1)
                with m.If(wrote & (head_line == i)):
                    m.d.sync += self.dirty[i].eq(1)


class CacheLookup:
    """Stages 2 and 3 of a :class:`~nfacep.hdl.sdram.store.SdramPartitioner` (which sets the
    settings these read)."""

    def _lookup(self, m: Module, tags, s1_stage, take: Signal, line_bits: int):
        """Stages 2 and 3: the tag check over two clocks. Stage 2 registers the tag of stage
        1's line (the bucket it holds and whether it is valid: a multiplexer over the lines'
        registers); stage 3 registers the comparison of that tag with the tuple's bucket,
        ``holds``, and decides. Only stage 3 allocates lines, so a tag read stays true while
        its tuple waits, but for stage 3's own allocations, which are forwarded: into the tag
        read in stage 1, into the tag held in stage 2, and into the comparison. Returns stage
        3's (tuple, valid, bucket, tick, line, holds, move) and its ``go`` and ``allocate``
        (driven by the caller); ``move`` says stage 3 takes stage 2's tuple."""
        s1, s1_valid, s1_bucket, s1_now = s1_stage
        go, allocate = Signal(name="s3_go"), Signal(name="s3_allocate")
        t = Signal.like(s1, name="s3")
        t_valid = Signal(name="s3_valid")
        t_bucket = Signal.like(s1_bucket, name="s3_bucket")
        t_now = Signal.like(s1_now, name="s3_now")
        t_line = Signal(line_bits, name="s3_line")
        t_holds = Signal(name="s3_holds")
        u = Signal.like(s1, name="s2")
        u_valid = Signal(name="s2_valid")
        u_bucket = Signal.like(s1_bucket, name="s2_bucket")
        u_now = Signal.like(s1_now, name="s2_now")
        u_line = Signal(line_bits, name="s2_line")
        # a line holds buckets whose low bits are its index: its tag is the bucket's high bits
        u_tag = Signal(len(tags.bucket[0]), name="s2_tag")
        u_tag_valid = Signal(name="s2_tag_valid")
        line = s1_bucket[:line_bits] if self._lines > 1 else Const(0, 1)
        move3 = Signal(name="s3_move")
        move2 = Signal(name="s2_move")
        m.d.comb += [
            move3.eq(~t_valid | go),
            move2.eq(~u_valid | move3),
            take.eq(~s1_valid | move2),
        ]
        # stage 1 reads its line's tag; stage 3's allocation of the line in the same clock is
        # registered beside it (``s2_given``), not forwarded into the read: the choice among
        # the lines' tags is the longest path, and goes straight into its register
        given = Signal(name="s2_given")  # stage 2's line was given away after its tag read
        given_bucket = Signal.like(s1_bucket, name="s2_given_bucket")  # ... to this bucket
        gives_u_line = Signal(name="s3_gives_s2_line")
        m.d.comb += gives_u_line.eq(allocate & (t_line == u_line))
        with m.If(move2):
            m.d.sync += [
                u_valid.eq(s1_valid),
                u.eq(s1),
                u_bucket.eq(s1_bucket),
                u_now.eq(s1_now),
                u_line.eq(line),
                u_tag.eq(tags.read(tags.bucket, line)),
                u_tag_valid.eq(tags.read(tags.valid, line)),
                given.eq(allocate & (t_line == line)),
                given_bucket.eq(t_bucket),
            ]
        # (stage 3 allocates only when it takes stage 2's tuple, which then leaves stage 2)
        # stage 2 compares the line's tag now (stage 3's allocations of it forwarded) with its
        # bucket; stage 3 keeps that tag, the bucket a job writes back if it takes the line
        # (the comparisons made before stage 3's allocation, late in the clock, chooses)
        tag = Signal.like(s1_bucket, name="s2_tag_now")
        tag_valid = Signal(name="s2_tag_now_valid")
        m.d.comb += [
            tag.eq(Mux(given, given_bucket, Cat(u_bucket[: tags.low], u_tag))),
            tag_valid.eq(given | u_tag_valid),
        ]
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
        self._moves = (move2, line, move3, u_line)
        return s3, go, allocate

    def _free(self, m: Module, tags, free: Signal, enter, leave) -> None:
        """Load ``free`` with whether stage 3's line will have no users after this clock.
        Stages 2 and 3 keep their line's count of users themselves, so that no choice among
        the lines' counts is on the way to ``free`` (nor to ``go``, which it drives): stage 2
        takes its line's count from the lines' registers (a choice among them, registered
        as it is) with, beside it, whether a tuple arrives at (``go``) or leaves (``done``)
        the line in that clock; then both stages apply the arrivals and departures as they
        come."""
        go, t_line = enter
        done, head_line = leave
        move2, line, move3, u_line = self._moves
        width = len(tags.users[0])
        u_raw = Signal(width, name="s2_users_read")
        u_in = Signal(name="s2_users_in")
        u_out = Signal(name="s2_users_out")
        u_users = Signal(width, name="s2_users")  # stage 2's line's users now
        m.d.comb += u_users.eq(u_raw + u_in - u_out)
        with m.If(move2):
            m.d.sync += [
                u_raw.eq(tags.read(tags.users, line)),
                u_in.eq(go & (t_line == line)),
                u_out.eq(done & (head_line == line)),
            ]
        with m.Else():  # (stage 2 waits: stage 3 does too, so no tuple arrives)
            m.d.sync += [u_raw.eq(u_users), u_in.eq(0), u_out.eq(done & (head_line == u_line))]
        t_users = Signal(width, name="s3_users")  # stage 3's line's users now
        leaves_u = done & (head_line == u_line)
        leaves_t = done & (head_line == t_line)
        # the count after this clock, for each case: ``go`` chooses among the ready answers
        took = Signal(width, name="s3_users_took")  # stage 3 takes stage 2's tuple, ...
        m.d.comb += took.eq(u_users - leaves_u)
        joined = Signal(width, name="s3_users_joined")  # ... and its own joins that line
        m.d.comb += joined.eq(took + (t_line == u_line))
        kept = Signal(width, name="s3_users_kept")
        m.d.comb += kept.eq(t_users - leaves_t)
        with m.If(go):
            m.d.sync += [t_users.eq(joined), free.eq(joined == 0)]
        with m.Elif(move3):  # stage 3 was empty
            m.d.sync += [t_users.eq(took), free.eq(took == 0)]
        with m.Else():
            m.d.sync += [t_users.eq(kept), free.eq(kept == 0)]
