"""The UDP link's transmit path, in the engine's clock domain (the transmit clock, 125 MHz at
1000 Mb/s)::

    engine records ▸ record FIFO ▸ UdpTx (RECORDS, STATUS, ARP replies) ▸ MacTx ▸ GMII

:class:`UdpTx` builds each frame from a header it loads whole into a shift register (the IPv4
checksum computed the cycle before), then the body (records from the FIFO, or the STATUS
fields snapshot at the frame's start), a byte per cycle with no pause; :class:`MacTx` adds the
preamble, pads to the minimum length, appends the FCS and keeps the inter-frame gap.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from nfacep.links.udp.protocol import HEADER_BYTES, MAX_PAYLOAD, STATUS_FIELDS, VERSION, PacketType

from .rx import FCS

__all__ = ["MacTx", "UdpTx", "frame_byte"]

#: The layout of the bytes a MAC sends: the byte and whether it is the frame's last.
frame_byte = data.StructLayout({"data": 8, "last": 1})
_ETH_IP_UDP = 14 + 20 + 8
_IFG = 12


class MacTx(wiring.Component):
    """The transmit MAC: preamble and SFD, the frame's bytes (zero-padded to 60), the FCS
    (:data:`~.rx.FCS`), then at least 12 idle cycles. GMII outputs come two registers after
    the byte is taken.

    ``i_stream`` must offer the frame's bytes back to back once its first is taken (it is not
    waited for: a byte missing mid-frame ends the frame with ``tx_er``, so the receiver drops
    it). ``busy`` is high from the first byte taken to the gap's end.

    Members
    -------
    i_stream : ``In(stream.Signature(frame_byte))``
    txd : ``Out(8)``
    tx_en, tx_er, busy : ``Out(1)``
    """

    def __init__(self):
        super().__init__(
            {
                "i_stream": In(stream.Signature(frame_byte)),
                "txd": Out(8),
                "tx_en": Out(1),
                "tx_er": Out(1),
                "busy": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.fcs = fcs = FCS.create()
        count = Signal(range(max(_IFG, 64)))
        error = Signal()
        # the FSM's byte (comb), then two registered stages (timing: the byte comes through
        # UdpTx's multiplexers): stage 1 feeds the FCS, stage 2 is GMII, the FCS's bytes put
        # in there, when the FCS has taken every byte before them
        txd, en, feed, fcs_slot = Signal(8), Signal(), Signal(), Signal()
        txd1 = Signal(8, reset_less=True)
        en1, feed1, fcs1 = Signal(), Signal(), Signal()
        index1 = Signal(2, reset_less=True)
        m.d.sync += [
            txd1.eq(txd),
            en1.eq(en),
            feed1.eq(feed),
            fcs1.eq(fcs_slot),
            index1.eq(count[:2]),
        ]
        m.d.comb += [fcs.data.eq(txd1), fcs.valid.eq(feed1)]
        m.d.sync += [
            self.txd.eq(Mux(fcs1, fcs.crc.word_select(index1, 8), txd1)),
            self.tx_en.eq(en1),
            self.tx_er.eq(en1 & error),
        ]
        i = self.i_stream
        with m.FSM(name="mac_tx") as fsm:
            with m.State("IDLE"):
                m.d.sync += [count.eq(0), error.eq(0)]
                with m.If(i.valid):
                    m.next = "PREAMBLE"
            with m.State("PREAMBLE"):
                m.d.comb += [en.eq(1), txd.eq(Mux(count == 7, 0xD5, 0x55)), fcs.start.eq(1)]
                m.d.sync += count.eq(count + 1)
                with m.If(count == 7):
                    m.d.sync += count.eq(0)
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [en.eq(1), i.ready.eq(1), txd.eq(i.payload.data), feed.eq(1)]
                m.d.sync += count.eq(Mux(count == 63, 63, count + 1))
                with m.If(~i.valid):
                    m.d.sync += error.eq(1)
                with m.If(~i.valid | i.payload.last):
                    with m.If(count >= 59):  # 60 bytes with this one
                        m.d.sync += count.eq(0)
                        m.next = "FCS"
                    with m.Else():
                        m.next = "PAD"
            with m.State("PAD"):
                m.d.comb += [en.eq(1), txd.eq(0), feed.eq(1)]
                m.d.sync += count.eq(count + 1)
                with m.If(count == 59):
                    m.d.sync += count.eq(0)
                    m.next = "FCS"
            with m.State("FCS"):
                m.d.comb += [en.eq(1), fcs_slot.eq(1)]
                m.d.sync += count.eq(count + 1)
                with m.If(count == 3):
                    m.d.sync += count.eq(0)
                    m.next = "GAP"
            with m.State("GAP"):
                m.d.sync += count.eq(count + 1)
                with m.If(count == _IFG - 2):
                    m.next = "IDLE"
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE") | en1)
        return m


def _be(value: Value, n: int) -> list[Value]:
    """The ``n`` bytes of ``value``, most significant first (network order)."""
    value = Value.cast(value)
    return [value.word_select(n - 1 - k, 8) for k in range(n)]


def _le(value: Value, n: int) -> list[Value]:
    value = Value.cast(value)
    return [value.word_select(k, 8) for k in range(n)]


def _const(value: int, n: int) -> Const:
    return Const(value, 8 * n)


class UdpTx(wiring.Component):
    """Frames to send: ARP replies, STATUS, and the engine's records in RECORDS packets.

    Between frames, in this order: an ARP reply when ``arp_request`` pulsed (to ``arp_peer``),
    STATUS when ``status_request`` did (to ``peer``), RECORDS (to ``peer``) when the record
    FIFO holds a packet's worth (``max_records``) or its oldest record has waited ``flush``
    cycles. Requests that come while a frame is built wait for the next. STATUS reports
    ``counters`` as they are when its frame starts (every record sent before is counted), and
    ``idle`` and ``next_seq``.

    Members
    -------
    i_stream : ``In(stream.Signature(record_layout))``
    o_stream : ``Out(stream.Signature(frame_byte))``
    arp_request, status_request, clear : ``In(1)``
        ``clear`` (RESET) empties the record FIFO and restarts the packet ``seq``.
    peer, arp_peer : ``In(StructLayout({"mac", "ip", "port"}))``
    counters : ``In(...)``
        The STATUS counters (32 bits each).
    next_seq : ``In(32)``
    idle : ``In(1)``
    count : ``Out(...)``
        ``matched``, ``drops``, ``records``, ``packets`` pulses.
    params : ``In(params_bits)``
        With ``params_bits``: the engine's runtime parameters' values in force, sent after
        STATUS's fields (padded to bytes, little-endian), as they are when its frame starts.
    """

    def __init__(
        self,
        record_layout: data.StructLayout,
        *,
        mac: bytes,
        ip: bytes,
        port: int,
        engine_id: int,
        tuple_bytes: int,
        capacity: int,
        counters,
        fifo_depth: int = 512,
        flush: int = 1024,
        params_bits: int = 0,
    ):
        self._record_layout = record_layout
        self._record_bytes = (record_layout.size + 7) // 8
        if fifo_depth < 4:
            raise ValueError(f"the record FIFO needs at least 4 entries, not {fifo_depth}")
        self._max_records = min(
            (MAX_PAYLOAD - HEADER_BYTES) // self._record_bytes, fifo_depth - 2
        )  # (the FIFO takes records up to depth - 2)
        self._mac, self._ip, self._port = mac, ip, port
        self._engine_id = engine_id & 0xFFFFFFFF
        self._constants = {
            "tuple_bytes": tuple_bytes,
            "record_bytes": self._record_bytes,
            "capacity": capacity,
        }
        self._counter_names = tuple(counters)
        self._fifo_depth = fifo_depth
        self._flush = flush
        self._params_bits = int(params_bits)
        self._values_bytes = (self._params_bits + 7) // 8
        endpoint = data.StructLayout({"mac": 48, "ip": 32, "port": 16})
        members = {
            "i_stream": In(stream.Signature(record_layout)),
            "o_stream": Out(stream.Signature(frame_byte)),
            "arp_request": In(1),
            "status_request": In(1),
            "clear": In(1),
            "peer": In(endpoint),
            "arp_peer": In(endpoint),
            "counters": In(wiring.Signature({n: Out(32) for n in self._counter_names})),
            "next_seq": In(32),
            "idle": In(1),
            "count": Out(
                wiring.Signature({n: Out(1) for n in ("matched", "drops", "records", "packets")})
            ),
        }
        if self._params_bits:
            members["params"] = In(self._params_bits)
        super().__init__(members)

    @property
    def max_records(self) -> int:
        return self._max_records

    def _status_body(self, flags) -> list[Value]:
        values = {**self._constants, "flags": flags, "next_seq": self.next_seq}
        out = []
        for name, n in STATUS_FIELDS:
            if name in values:
                out += _le(
                    Value.cast(values[name])
                    if not isinstance(values[name], int)
                    else _const(values[name], n),
                    n,
                )
            else:
                out += _le(getattr(self.counters, name), n)
        if self._params_bits:
            out += _le(self.params, self._values_bytes)  # (word_select pads with zeros)
        return out

    def elaborate(self, platform):
        m = Module()
        rb = self._record_bytes
        fifo, head = self._record_fifo(m)

        want_arp, want_status = Signal(), Signal()
        with m.If(self.arp_request):
            m.d.sync += want_arp.eq(1)
        with m.If(self.status_request):
            m.d.sync += want_status.eq(1)
        waited = Signal(range(self._flush + 1))
        with m.If(fifo.level == 0):
            m.d.sync += waited.eq(0)
        with m.Elif(waited != self._flush):
            m.d.sync += waited.eq(waited + 1)
        # whether to send records and how many, registered (timing); between packets the
        # level only grows, so a cycle-old count is there; RESET (clear) forgets it
        batch = Signal(range(self._max_records + 1))
        go_records = Signal()
        m.d.sync += [
            batch.eq(Mux(fifo.level >= self._max_records, self._max_records, fifo.level)),
            go_records.eq(
                (fifo.level >= self._max_records) | ((fifo.level != 0) & (waited == self._flush))
            ),
        ]
        with m.If(self.clear):
            m.d.sync += [batch.eq(0), go_records.eq(0)]

        seq = Signal(32)  # the board's UDP packets
        with m.If(self.clear):
            m.d.sync += seq.eq(0)
        kind = Signal(8)  # the payload type, or 0 for ARP
        n_records = Signal(range(self._max_records + 1))
        body_len = Signal(11)
        body_last = Signal(11)  # body_len - 1, registered (timing)
        remaining = Signal(11)  # RECORDS: body bytes after the one offered
        last_byte = Signal()  # RECORDS: the byte offered is the body's last (remaining == 0)
        ip_len = Signal(16)
        checksum = Signal(16)
        dst = Signal.like(self.peer)
        header_bytes = _ETH_IP_UDP + HEADER_BYTES
        header = Signal(8 * header_bytes)
        status_bytes = sum(n for _, n in STATUS_FIELDS) + self._values_bytes
        status = Signal(8 * status_bytes)
        record = Signal(8 * rb)
        index = Signal(11)  # the byte of the header or the body being offered
        in_record = Signal(range(rb))
        status_flags = Signal(32)

        out = self.o_stream
        taken = out.valid & out.ready
        m.d.comb += status_flags.eq(self.idle & (fifo.level == 0))

        src_ip = int.from_bytes(self._ip, "big")
        constant = 0x4500 + 0x4000 + 0x4011 + (src_ip >> 16) + (src_ip & 0xFFFF)
        # the checksum in three registered steps (timing)
        part1, part2 = Signal(17), Signal(17)
        total = Signal(20)
        fold = Signal(17)

        cleared = Signal()
        with m.FSM(name="udp_tx"):
            with m.State("IDLE"):
                m.d.sync += [index.eq(0), cleared.eq(0)]
                with m.If(want_arp):
                    m.d.sync += [want_arp.eq(0), kind.eq(0), body_len.eq(0), dst.eq(self.arp_peer)]
                    m.next = "LOAD"
                with m.Elif(want_status):
                    m.d.sync += [
                        want_status.eq(0),
                        kind.eq(PacketType.STATUS),
                        body_len.eq(status_bytes),
                        dst.eq(self.peer),
                        ip_len.eq(20 + 8 + HEADER_BYTES + status_bytes),
                    ]
                    m.next = "SUM"
                with m.Elif(go_records & ~self.clear):
                    m.d.sync += [
                        kind.eq(PacketType.RECORDS),
                        n_records.eq(batch),
                        dst.eq(self.peer),
                    ]
                    m.next = "LENGTH"
            with m.State("LENGTH"):
                # (shifts and adds, not a multiplier block: timing)
                m.d.sync += body_len.eq(
                    sum(n_records << k for k in range(rb.bit_length()) if rb >> k & 1)
                )
                m.next = "LENGTH2"
            with m.State("LENGTH2"):
                m.d.sync += ip_len.eq(body_len + 20 + 8 + HEADER_BYTES)
                m.next = "SUM"
            with m.State("SUM"):
                m.d.sync += [
                    part1.eq(ip_len + seq[:16]),
                    part2.eq(dst.ip[16:] + dst.ip[:16]),
                    body_last.eq(body_len - 1),
                ]
                m.next = "SUM2"
            with m.State("SUM2"):
                m.d.sync += total.eq(part1 + part2 + constant)
                m.next = "SUM3"
            with m.State("SUM3"):
                m.d.sync += fold.eq(total[:16] + total[16:])
                m.next = "SUM4"
            with m.State("SUM4"):
                m.d.sync += checksum.eq(~(fold[:16] + fold[16])[:16])
                m.next = "LOAD"
            with m.State("LOAD"):
                self._load(m, header, status, kind, dst, ip_len, checksum, seq, status_flags)
                m.next = "HEADER"
                with m.If((self.clear | cleared) & (kind == PacketType.RECORDS)):
                    m.next = "IDLE"  # RESET since the packet was decided: its records are gone
            with m.State("HEADER"):
                arp = kind == 0
                last_header = Mux(arp, 42 - 1, header_bytes - 1)
                m.d.comb += [
                    out.valid.eq(1),
                    out.payload.data.eq(header[:8]),
                    out.payload.last.eq(arp & (index == last_header)),
                ]
                with m.If(taken):
                    m.d.sync += [header.eq(header >> 8), index.eq(index + 1)]
                    with m.If(index == last_header):
                        m.d.sync += index.eq(0)
                        with m.If(arp):
                            m.next = "IDLE"
                        with m.Elif(kind == PacketType.STATUS):
                            m.d.sync += seq.eq(seq + 1)
                            m.next = "STATUS"
                        with m.Else():
                            m.d.sync += [
                                seq.eq(seq + 1),
                                in_record.eq(0),
                                record.eq(head),
                                remaining.eq(body_last),
                                last_byte.eq(0),
                            ]
                            m.d.comb += fifo.r_en.eq(1)
                            self._count(m, head)
                            m.next = "RECORDS"
            with m.State("STATUS"):
                last = index == status_bytes - 1
                m.d.comb += [
                    out.valid.eq(1),
                    out.payload.data.eq(status[:8]),
                    out.payload.last.eq(last),
                ]
                with m.If(taken):
                    m.d.sync += [status.eq(status >> 8), index.eq(index + 1)]
                    with m.If(last):
                        m.next = "IDLE"
            with m.State("RECORDS"):
                last = last_byte
                m.d.comb += [
                    out.valid.eq(1),
                    out.payload.data.eq(record[:8]),
                    out.payload.last.eq(last),
                ]
                with m.If(taken):
                    m.d.sync += [
                        record.eq(record >> 8),
                        index.eq(index + 1),
                        in_record.eq(in_record + 1),
                        remaining.eq(remaining - 1),
                        last_byte.eq(remaining == 1),
                    ]
                    with m.If(in_record == rb - 1):
                        m.d.sync += in_record.eq(0)
                        with m.If(~last):
                            m.d.sync += record.eq(head)
                            m.d.comb += fifo.r_en.eq(1)
                            self._count(m, head)
                    with m.If(last):
                        m.d.comb += self.count.packets.eq(1)
                        m.next = "IDLE"
        with m.If(self.clear):
            m.d.sync += cleared.eq(1)
        return m

    def _record_fifo(self, m):
        """The records waiting: a block-RAM ring of ``fifo_depth`` entries. Returns the FIFO
        (``level``, ``r_en`` to pop the head) and ``head``, the oldest record.

        ``i_stream.ready`` comes from a register (the engine's stall logic behind it is deep:
        timing): the level a cycle ago left room for this cycle's write and the last one's,
        so the ring holds at most ``depth - 2`` records. The block RAM's read data goes
        into a register and then into ``head`` (the block RAM's clock-to-output is slow);
        ``head`` shows the entry at the read pointer two cycles after the pointer moves or the
        entry is written,
        and records are popped at least ``record_bytes`` >= 7 cycles apart. ``clear`` empties
        the ring."""
        depth = self._fifo_depth
        width = self._record_layout.size
        m.submodules.records = memory = Memory(
            shape=width, depth=depth, init=[], attrs={"ram_style": "block", "no_rw_check": True}
        )
        wp = memory.write_port()
        # an asynchronous read port registered outside, and no_rw_check: Yosys merges the
        # register into the block RAM without the bypass logic that would make a read of the
        # entry being written return the old one (framing._memory does the same); `head`
        # re-reads every cycle and a record is used two cycles after it is written
        rp = memory.read_port(domain="comb")
        read = Signal(width, reset_less=True)

        class Fifo:
            level = Signal(range(depth + 1))
            r_en = Signal()

        fifo = Fifo()
        wptr, rptr = Signal(range(depth)), Signal(range(depth))
        room = Signal()
        write = Signal()
        head = Signal(width, reset_less=True)
        m.d.comb += [
            write.eq(self.i_stream.valid & room),
            self.i_stream.ready.eq(room),
            wp.addr.eq(wptr),
            wp.data.eq(self.i_stream.payload),
            wp.en.eq(write),
            rp.addr.eq(rptr),
        ]
        m.d.sync += [
            room.eq(fifo.level < depth - 2),
            read.eq(rp.data),
            head.eq(read),
            fifo.level.eq(fifo.level + write - fifo.r_en),
        ]
        with m.If(write):
            m.d.sync += wptr.eq(Mux(wptr == depth - 1, 0, wptr + 1))
        with m.If(fifo.r_en):
            m.d.sync += rptr.eq(Mux(rptr == depth - 1, 0, rptr + 1))
        with m.If(self.clear):
            m.d.sync += [wptr.eq(0), rptr.eq(0), fifo.level.eq(0), room.eq(0)]
        return fifo, head

    def _count(self, m, raw):
        record = data.View(self._record_layout, raw)
        m.d.comb += [
            self.count.records.eq(1),
            self.count.matched.eq(record.matches.any()),
            self.count.drops.eq(record.dropped),
        ]

    def _load(self, m, header, status, kind, dst, ip_len, checksum, seq, flags):
        """The header (UDP: Ethernet, IPv4, UDP and payload header; ARP: the reply) and the
        STATUS body, whole."""
        mac = _const(int.from_bytes(self._mac, "big"), 6)
        ip = _const(int.from_bytes(self._ip, "big"), 4)
        with m.If(kind == 0):
            arp = [
                *_be(dst.mac, 6),
                *_be(mac, 6),
                *_be(_const(0x0806, 2), 2),
                *_be(_const(0x0001_0800_0604_0002, 8), 8),
                *_be(mac, 6),
                *_be(ip, 4),
                *_be(dst.mac, 6),
                *_be(dst.ip, 4),
            ]
            m.d.sync += header.eq(Cat(*arp))
        with m.Else():
            udp = [
                *_be(dst.mac, 6),
                *_be(mac, 6),
                *_be(_const(0x0800, 2), 2),
                *_be(_const(0x4500, 2), 2),
                *_be(ip_len, 2),
                *_be(seq[:16], 2),
                *_be(_const(0x4000, 2), 2),
                *_be(_const(0x4011, 2), 2),
                *_be(checksum, 2),
                *_be(ip, 4),
                *_be(dst.ip, 4),
                *_be(_const(self._port, 2), 2),
                *_be(dst.port, 2),
                *_be((ip_len - 20)[:16], 2),
                *_be(_const(0, 2), 2),
                _const(VERSION, 1),
                kind,
                *_le(_const(0, 2), 2),
                *_le(seq, 4),
                *_le(_const(self._engine_id, 4), 4),
            ]
            m.d.sync += [header.eq(Cat(*udp)), status.eq(Cat(*self._status_body(flags)))]
