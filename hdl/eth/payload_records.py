"""The STATUS and RECORDS packetizer of :class:`~.payload_tx.UdpTx`
(:class:`StatusRecords`): STATUS's fields as they are when its frame starts, the records
waiting in a block-RAM ring, and the two bodies' bytes out."""

from __future__ import annotations

from amaranth.hdl import Mux, Signal, Value
from amaranth.lib import data

from nfacep.links.udp.protocol import (
    STATUS_FIELDS,
)

from ..bram import RegisteredBank
from .headers import (
    Header,
)
from .packet import pack

__all__ = ["StatusRecords"]


class StatusRecords:
    """STATUS's and RECORDS' bodies for a :class:`~.payload_tx.UdpTx` (which sets the
    constants, counters and members these read)."""

    def _status_body(self, flags) -> Value:
        """STATUS's fields (:data:`~nfacep.links.udp.protocol.STATUS_FIELDS`, then the
        values in force) as they are now: the bytes a :class:`~.packet.Packetizer` sends."""
        fields = dict(STATUS_FIELDS)
        if self._values_bytes:
            fields["params"] = self._values_bytes
        values = {
            **self._constants,
            "flags": flags,
            "next_seq": self.next_seq,
            "image": self.image,
            "refused": self.refused,
            "image_from": self.image_from,
            "load_offset": self.load_offset,
        }
        for name in self._counter_names:
            values[name] = getattr(self.counters, name)
        if self._params_bits:
            values["params"] = self.params
        body = Header("status", fields, byteorder="little")
        return pack(body, {name: values[name] for name in fields})

    def _status_records_states(self, m, f, status, fifo, head):
        """STATUS and RECORDS (:meth:`_body_states`)."""
        out = self.o_stream
        # (``valid`` is high in STATUS and RECORDS: a byte is taken when the stream is ready;
        # not ``valid & ready``, whose ``valid`` is every state's: timing)
        taken = out.ready
        rb = self._record_bytes
        assert status.length > 1
        with m.State("STATUS"):
            # ``status_end``: the byte offered is the last (0 when STATUS starts, at byte 0;
            # set as the one before it is taken)
            m.d.comb += [
                out.valid.eq(1),
                out.payload.data.eq(status.byte),
                out.payload.last.eq(f.status_end),
            ]  # (status.shift: UdpTx.elaborate)
            with m.If(taken):
                m.d.sync += [
                    f.index.eq(f.index + 1),
                    f.status_end.eq(f.index == status.length - 2),
                ]
                with m.If(f.status_end):  # (f.status_stop is high)
                    m.d.sync += [f.in_status.eq(0), f.status_end.eq(0)]
                    m.next = "IDLE"
        with m.State("RECORDS"):
            last = f.last_byte
            m.d.comb += [
                out.valid.eq(1),
                out.payload.data.eq(f.record[:8]),
                out.payload.last.eq(last),
            ]
            with m.If(taken):
                m.d.sync += [
                    f.record.eq(f.record >> 8),
                    f.index.eq(f.index + 1),
                    f.in_record.eq(f.in_record + 1),
                    f.remaining.eq(f.remaining - 1),
                    f.last_byte.eq(f.remaining == 1),
                ]
                with m.If(f.in_record == rb - 1):
                    m.d.sync += f.in_record.eq(0)
                    with m.If(~last):
                        m.d.sync += f.record.eq(head)
                        m.d.comb += fifo.r_en.eq(1)
                        self._count(m, head)
                with m.If(last):
                    m.d.comb += self.count.packets.eq(1)
                    m.next = "IDLE"

    def _record_fifo(self, m):
        """The records waiting: a block-RAM ring of ``fifo_depth`` entries. Returns the FIFO
        (``level``, ``r_en`` to pop the head) and ``head``, the oldest record.

        ``i_stream.ready`` comes from a register (the engine's stall logic behind it is deep:
        timing): the level a cycle ago left room for this cycle's write and the last one's,
        so the ring holds at most ``depth - 2`` records. The ring is a
        :class:`~nfacep.hdl.bram.RegisteredBank` of three read stages, read every cycle at
        the read pointer: the block RAM's address register, its output register (on ECP5 the
        DP16KD's own: its clock-to-output without it, about 5.8 ns of the 8, left no room
        for the routing to the next register, timing) and ``head``, a flip-flop after it.
        A pop (``r_en``, from the state machine and the stream's ready) moves the read pointer
        and the level a cycle later, through a register (timing: it reached the level's adder,
        a carry chain, in the same cycle), so ``head`` shows the next entry four cycles after
        the pop (three after the pointer moves; or after the entry is written: a read of the
        entry being written gives either value, the next cycle's is right), and records are
        popped at least ``record_bytes`` >= 7 cycles apart (a packet's first record is loaded
        through its headers, which take longer); the level, a cycle late, only waits longer
        for room. ``clear`` empties the ring (a pop in its cycle or the one before is
        forgotten)."""
        depth = self._fifo_depth
        width = self._record_layout.size
        m.submodules.records = ring = RegisteredBank(width=width, depth=depth, stages=3)

        class Fifo:
            level = Signal(range(depth + 1))
            r_en = Signal()

        fifo = Fifo()
        wptr, rptr = Signal(range(depth)), Signal(range(depth))
        room = Signal()
        write = Signal()
        popped = Signal()  # r_en a cycle ago
        m.d.comb += [
            write.eq(self.i_stream.valid & room),
            self.i_stream.ready.eq(room),
            ring.w_addr.eq(wptr),
            ring.w_data.eq(self.i_stream.payload),
            ring.w_en.eq(write),
            ring.r_addr.eq(rptr),
            ring.r_en.eq(1),
        ]
        m.d.sync += [
            room.eq(fifo.level < depth - 2),
            fifo.level.eq(fifo.level + write - popped),
            popped.eq(fifo.r_en),
        ]
        with m.If(write):
            m.d.sync += wptr.eq(Mux(wptr == depth - 1, 0, wptr + 1))
        with m.If(popped):
            m.d.sync += rptr.eq(Mux(rptr == depth - 1, 0, rptr + 1))
        with m.If(self.clear):
            m.d.sync += [wptr.eq(0), rptr.eq(0), fifo.level.eq(0), room.eq(0), popped.eq(0)]
        return fifo, ring.r_data

    def _count(self, m, raw):
        record = data.View(self._record_layout, raw)
        m.d.comb += [
            self.count.records.eq(1),
            self.count.matched.eq(record.matches.any()),
            self.count.drops.eq(record.dropped),
        ]
