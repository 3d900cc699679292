"""The payload layer's transmit side (:class:`UdpTx`): which frame goes next (ARP reply,
echo reply, STATUS, RECORDS), its lengths and checksums' timing, and its headers' and body's
bytes out, built by :class:`~.payload_headers.TxHeaders` and
:class:`~.payload_records.StatusRecords`."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from nfacep.links.protocol import ENGINE_FIELDS
from nfacep.links.udp.protocol import (
    HEADER_BYTES,
    MAX_PAYLOAD,
    STATUS_FIELDS,
    PacketType,
)

from ..bram import register_copy
from . import icmp
from .headers import (
    ARP,
    ETHERNET,
    ICMP,
    INDEX_BITS,
    IPV4,
    PAYLOAD,
    UDP,
)
from .mac import frame_byte
from .packet import Packetizer
from .payload_headers import _KIND_ECHO, TxHeaders
from .payload_records import StatusRecords

__all__ = ["UdpTx"]

#: STATUS's fields that say which engine the board has (constants, :class:`UdpTx`'s
#: ``engine_fields``).
_ENGINE_KIND_FIELDS = ("engine", "states", "atoms", "queries")
#: Header bytes: an ARP reply's (Ethernet, ARP); an echo reply's (Ethernet, IPv4, ICMP); a UDP
#: packet's (Ethernet, IPv4, UDP, payload).
_ARP_HEADERS = ETHERNET.length + ARP.length
_ECHO_HEADERS = ETHERNET.length + IPV4.length + ICMP.length
_UDP_HEADERS = ETHERNET.length + IPV4.length + UDP.length + PAYLOAD.length
#: The IPv4 length of a packet with an empty body.
_IP_UDP_PAYLOAD = IPV4.length + UDP.length + PAYLOAD.length
#: STATUS's bytes per group of its shift register (:class:`~.packet.Packetizer`'s ``groups``).
_STATUS_GROUP = 16


class _TxFrame:
    """:class:`UdpTx`'s registers for the frame being built and sent."""

    def __init__(self, max_records: int, record_bytes: int):
        self.kind = Signal(8)  # the payload type, 0 for ARP, _KIND_ECHO for an echo reply
        # which kind, one flip-flop each, set with it (timing: the header state's decisions
        # read these, not 8-bit compares of kind)
        # (kind's reset value is ARP's 0, so is_arp's is 1)
        self.is_arp, self.is_echo, self.is_status, self.is_records = (
            Signal(name=f"is_{n}", init=n == "arp") for n in ("arp", "echo", "status", "records")
        )
        self.icmp_checksum = Signal(16)  # an echo reply's
        # its first half, from the request's checksum each cycle (folded into icmp_checksum
        # in SUM: one add a cycle, for timing)
        self.echo_sum = Signal(17)
        self.seq = Signal(32)  # the board's UDP packets
        self.n_records = Signal(range(max_records + 1))
        self.body_len = Signal(11)
        self.body_last = Signal(11)  # body_len - 1, registered (timing)
        self.remaining = Signal(11)  # RECORDS: body bytes after the one offered
        self.last_byte = Signal()  # RECORDS: the byte offered is the body's last
        self.ip_len = Signal(16)
        self.dst = Signal(data.StructLayout({"mac": 48, "ip": 32, "port": 16}))
        self.session = Signal(32)  # the payload header's session id
        self.numbered = Signal()  # a STATUS that takes a number of the session's (seq)
        self.record = Signal(8 * record_bytes)
        self.index = Signal(11)  # the byte of the header or the body being offered
        self.in_record = Signal(range(record_bytes))
        self.flags = Signal(32)  # STATUS's (combinational)
        self.cleared = Signal()  # RESET came since the frame was decided
        self.reading = Signal()  # (combinational) an echo reply's headers or body are sent
        self.prefetch = None  # the echo reply's bytes read ahead (UdpTx._echo_reads)
        # the state is LOAD, HEADER, STATUS: registers beside the state machine's, the
        # packetizers' load and shift enables (timing: one LUT from registers, the stream's
        # ready a skid buffer's, to the enable of STATUS's ~900 flip-flops)
        self.loading = Signal()
        self.in_header = Signal()
        self.in_status = Signal()
        # the byte offered is the headers' last (in HEADER) or STATUS's last (in STATUS):
        # registers, so that STATUS's start and end are one gate of registers and the
        # stream's ready, not of the state and the byte count (timing: the copies of
        # STATUS's enables, UdpTx._packetizers)
        self.header_end = Signal()
        self.status_end = Signal()
        # the state is ECHO: a register beside the state machine's, so that the echo
        # prefetch's read enable is one gate of registers and the stream's ready (timing: the
        # FIFO's level and output register behind it)
        self.in_echo = Signal()
        # (combinational) loading and in_status set at the edge, in_status cleared: their next
        # values, which the copies of STATUS's groups take (UdpTx._packetizers)
        self.load_start, self.status_start, self.status_stop = Signal(), Signal(), Signal()


class UdpTx(TxHeaders, StatusRecords, wiring.Component):
    """Frames to send: ARP replies, ICMP echo replies, STATUS, and the engine's records in
    RECORDS packets.

    Between frames, in this order: an ARP reply when ``arp_request`` pulsed (to ``arp_peer``),
    an echo reply when ``echo_request`` did (to ``echo_peer``: ``echo_length`` is the request's
    IPv4 length, ``echo_checksum`` its ICMP checksum; the rest of the message is read from the
    echo buffer, ``echo_addr`` to ``echo_data`` a cycle later; ``echo_done`` pulses when the
    reply is out), STATUS when ``status_request`` did (to ``peer``), RECORDS (to ``peer``) when
    the record FIFO holds a packet's worth (``max_records``) or its oldest record has waited
    ``flush`` cycles. Requests that come while a frame is built wait for the next. STATUS reports
    ``counters`` as they are when its frame starts (every record sent before is counted), and
    ``idle`` and ``next_seq``.

    Members
    -------
    i_stream : ``In(stream.Signature(record_layout))``
    o_stream : ``Out(stream.Signature(frame_byte))``
    arp_request, status_request, clear : ``In(1)``
        ``clear`` (RESET) empties the record FIFO and restarts the packet ``seq``.
    peer, arp_peer : ``In(StructLayout({"mac", "ip", "port"}))``
    echo_request : ``In(1)``
    echo_peer : ``In(StructLayout({"mac", "ip", "port"}))``
    echo_length, echo_checksum : ``In(16)``
    echo_addr : ``Out(11)``
    echo_data : ``In(8)``
    echo_done : ``Out(1)``
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
        engine_fields: dict[str, int] | None = None,
        echo: bool = True,
    ):
        self._record_layout = record_layout
        self._echo = echo
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
            # the engine parameters (ENGINE_FIELDS, and the programmable engine's kind and
            # capacities): zero unless given
            **{name: 0 for name, _ in ENGINE_FIELDS},
            **dict.fromkeys(_ENGINE_KIND_FIELDS, 0),
            **(engine_fields or {}),
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
            "status_peer": In(endpoint),
            "status_session": In(32),
            "status_numbered": In(1),
            "image": In(64),
            "refused": In(32),
            "image_from": In(32),
            "load_offset": In(32),
            "session": In(32),
            "arp_peer": In(endpoint),
            "echo_request": In(1),
            "echo_peer": In(endpoint),
            "echo_length": In(16),
            "echo_checksum": In(16),
            "echo_addr": Out(INDEX_BITS),
            "echo_data": In(8),
            "echo_done": Out(1),
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

    def elaborate(self, platform):
        m = Module()
        fifo, head = self._record_fifo(m)
        want_arp, want_status, go_records, batch = self._requests(m, fifo)
        want_echo = Signal()
        with m.If(self.echo_request):
            m.d.sync += want_echo.eq(1)
        f = _TxFrame(self._max_records, self._record_bytes)
        checksum, icmp_checksum = self._checksums(m, f)
        status_bytes = sum(n for _, n in STATUS_FIELDS) + self._values_bytes
        m.submodules.header = header = Packetizer(_UDP_HEADERS)
        m.submodules.status = status = Packetizer(
            status_bytes, groups=-(-status_bytes // _STATUS_GROUP)
        )
        m.d.comb += f.flags.eq(self.idle & (fifo.level == 0))
        if self._echo:
            self._echo_reads(m, f)
            m.d.sync += f.echo_sum.eq(icmp.reply_sum(self.echo_checksum))
        with m.If(self.clear):
            m.d.sync += f.seq.eq(0)
        with m.FSM(name="udp_tx"):
            with m.State("IDLE"):
                m.d.sync += [f.index.eq(0), f.cleared.eq(0)]
                with m.If(want_arp):
                    m.d.sync += [
                        want_arp.eq(0),
                        f.kind.eq(0),
                        *self._kind_flags(f, "arp"),
                        f.body_len.eq(0),
                        f.dst.eq(self.arp_peer),
                        f.loading.eq(1),
                    ]
                    m.d.comb += f.load_start.eq(1)
                    m.next = "LOAD"
                with m.Elif(want_echo & self._echo):
                    m.d.sync += [
                        want_echo.eq(0),
                        f.kind.eq(_KIND_ECHO),
                        *self._kind_flags(f, "echo"),
                        f.dst.mac.eq(self.echo_peer.mac),
                        f.dst.ip.eq(self.echo_peer.ip),
                        f.ip_len.eq(self.echo_length),
                        f.body_len.eq(self.echo_length - IPV4.length - ICMP.length),
                    ]
                    m.next = "SUM"
                with m.Elif(want_status):
                    m.d.sync += [
                        want_status.eq(0),
                        f.kind.eq(PacketType.STATUS),
                        *self._kind_flags(f, "status"),
                        f.body_len.eq(status_bytes),
                        f.dst.eq(self.status_peer),
                        f.session.eq(self.status_session),
                        f.numbered.eq(self.status_numbered),
                        f.ip_len.eq(_IP_UDP_PAYLOAD + status_bytes),
                    ]
                    m.next = "SUM"
                with m.Elif(go_records & ~self.clear):
                    m.d.sync += [
                        f.kind.eq(PacketType.RECORDS),
                        *self._kind_flags(f, "records"),
                        f.n_records.eq(batch),
                        f.dst.eq(self.peer),
                        f.session.eq(self.session),
                    ]
                    m.next = "LENGTH"
            self._lengths(m, f)
            with m.State("LOAD"):
                m.d.sync += [f.loading.eq(0), f.in_header.eq(1)]
                m.next = "HEADER"
                with m.If((self.clear | f.cleared) & f.is_records):
                    m.d.sync += f.in_header.eq(0)
                    m.next = "IDLE"  # RESET since the packet was decided: its records are gone
            self._header_state(m, f, header, fifo, head)
            self._body_states(m, f, status, fifo, head)
        with m.If(self.clear):
            m.d.sync += f.cleared.eq(1)
        self._packetizers(m, platform, f, header, status, (checksum, icmp_checksum))
        return m

    def _packetizers(self, m, platform, f, header, status, sums):
        """The headers' and STATUS's shift registers: loaded in LOAD, shifted in HEADER and
        STATUS as their bytes are taken. (STATUS's body is loaded for every frame, unused but
        by STATUS, so that its shift register's enable, ~900 flip-flops, depends on registers
        and the stream's ready alone, not on the payload type; and each group of its bytes
        has copies of ``loading`` and ``in_status`` of its own, registers Yosys does not merge
        (:func:`~nfacep.hdl.bram.register_copy`), so that no one net enables all of them:
        timing.)"""
        ready = self.o_stream.ready
        m.d.comb += [
            header.load.eq(f.loading),
            header.i_data.eq(self._headers(f, *sums)),
            header.shift.eq(f.in_header & ready),
            status.i_data.eq(self._status_body(f.flags)),
        ]
        # STATUS's first byte is taken after the headers' last, its last byte ends it: from
        # registers and the stream's ready alone (in HEADER and STATUS ``valid`` is high)
        m.d.comb += [
            f.status_start.eq(f.header_end & f.is_status & ready),
            f.status_stop.eq(f.status_end & ready),
        ]
        in_status_next = f.status_start | (f.in_status & ~f.status_stop)
        for g in range(status.groups):
            loading, in_status = register_copy(
                m, platform, Cat(f.load_start, in_status_next), Const(1), f"status_en{g}"
            )
            m.d.comb += [status.load[g].eq(loading), status.shift[g].eq(in_status & ready)]

    def _requests(self, m, fifo):
        """What waits to be sent: the requests since the last frame, and whether to send
        records and how many (registered: timing; between packets the level only grows, so a
        cycle-old count is there; RESET, ``clear``, forgets it)."""
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
        return want_arp, want_status, go_records, batch

    def _lengths(self, m, f):
        """RECORDS' body length (LENGTH, LENGTH2), then four cycles for the IPv4 checksum
        (:class:`~.ipv4.Ipv4Checksum`, which reads ``ip_len``, ``seq`` and ``dst`` in SUM)."""
        rb = self._record_bytes
        with m.State("LENGTH"):
            # (shifts and adds, not a multiplier block: timing)
            m.d.sync += f.body_len.eq(
                sum(f.n_records << k for k in range(rb.bit_length()) if rb >> k & 1)
            )
            m.next = "LENGTH2"
        with m.State("LENGTH2"):
            m.d.sync += f.ip_len.eq(f.body_len + _IP_UDP_PAYLOAD)
            m.next = "SUM"
        with m.State("SUM"):
            m.d.sync += f.body_last.eq(f.body_len - 1)
            if self._echo:  # (echo_sum is from the request's checksum in IDLE)
                m.d.sync += f.icmp_checksum.eq(icmp.reply_fold(f.echo_sum))
            m.next = "SUM2"
        with m.State("SUM2"):
            m.next = "SUM3"
        with m.State("SUM3"):
            m.next = "SUM4"
        with m.State("SUM4"):
            m.d.sync += f.loading.eq(1)
            m.d.comb += f.load_start.eq(1)
            m.next = "LOAD"

    @staticmethod
    def _kind_flags(f, kind: str) -> list:
        """The one-hot flags of the frame's kind, set with ``kind``."""
        return [getattr(f, f"is_{n}").eq(n == kind) for n in ("arp", "echo", "status", "records")]

    def _header_state(self, m, f, header, fifo, head):
        """HEADER: the headers' bytes; then IDLE (ARP) or the body. ``header_end`` says the
        byte offered is the last: 0 when HEADER starts (``index`` is 0 then, every frame has
        more than one header byte), set as the one before it is taken."""
        out = self.o_stream
        # (``valid`` is high in HEADER: a byte is taken when the stream is ready; not
        # ``valid & ready``, whose ``valid`` is every state's, the echo prefetch's included:
        # timing)
        taken = out.ready
        arp_reply = f.is_arp
        echo = f.is_echo if self._echo else Const(0)
        before_last = Mux(
            arp_reply, _ARP_HEADERS - 2, Mux(echo, _ECHO_HEADERS - 2, _UDP_HEADERS - 2)
        )
        assert min(_ARP_HEADERS, _ECHO_HEADERS, _UDP_HEADERS) > 1
        with m.State("HEADER"):
            m.d.comb += [
                f.reading.eq(echo),
                out.valid.eq(1),
                out.payload.data.eq(header.byte),
                out.payload.last.eq(arp_reply & f.header_end),
            ]
            # a RECORDS packet's first record loaded in every cycle of its headers (the head
            # stays: nothing is popped until their last byte), so that the load's enable
            # depends on no byte count (timing: the record's 56 flip-flops)
            with m.If(f.is_records):
                m.d.sync += f.record.eq(head)
            with m.If(taken):
                m.d.sync += [f.index.eq(f.index + 1), f.header_end.eq(f.index == before_last)]
                with m.If(f.header_end):
                    m.d.sync += [f.index.eq(0), f.in_header.eq(0), f.header_end.eq(0)]
                    with m.If(arp_reply):
                        m.next = "IDLE"
                    if self._echo:
                        with m.Elif(echo):
                            m.d.sync += f.in_echo.eq(1)
                            m.next = "ECHO"
                    with m.Elif(f.is_status):
                        with m.If(f.numbered):  # (a LOAD's answer: the next number, kept)
                            m.d.sync += f.seq.eq(f.seq + 1)
                        m.d.sync += f.in_status.eq(1)  # (f.status_start is high)
                        m.next = "STATUS"
                    with m.Else():
                        m.d.sync += [
                            f.seq.eq(f.seq + 1),
                            f.in_record.eq(0),
                            f.remaining.eq(f.body_last),
                            f.last_byte.eq(0),
                        ]
                        m.d.comb += fifo.r_en.eq(1)
                        self._count(m, head)
                        m.next = "RECORDS"

    def _body_states(self, m, f, status, fifo, head):
        """STATUS: its fields' bytes; RECORDS: the records', each popped from the FIFO when its
        first byte is offered; ECHO: the echo buffer's, from the prefetch FIFO
        (:meth:`_echo_reads`; only with ``echo``)."""
        if self._echo:
            self._echo_state(m, f)
        self._status_records_states(m, f, status, fifo, head)
