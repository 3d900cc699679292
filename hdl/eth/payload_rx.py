"""The payload layer's receive side (:class:`PayloadRx`): the payload header read, TUPLES'
bytes handed to the packet queue, LOADs reassembled, the session kept, and each frame's class
(decided by :class:`~.payload_classify.Classify`) handed on as an event."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from nfacep.links.protocol import SWITCH_BYTES
from nfacep.links.udp.protocol import (
    LOAD_HEADER_BYTES,
    LOAD_LAST,
    SESSION_IDLE_CYCLES,
    VERSION,
    PacketType,
)

from .headers import (
    INDEX_BITS,
    IPV4,
    PAYLOAD,
    UDP,
    Header,
)
from .packet import Depacketizer, compare_bytes, frame_signature, on_bytes
from .payload import ECHO_AT, LOWER, PAYLOAD_AT, EventKind, FrameClass, event_layout
from .payload_classify import Classify

__all__ = ["BREAK_DATA", "PayloadRx", "Session"]

#: Test-only: the end of a packet's data broken on purpose, so that a test shows it catches it.
#: ``"data_more"``: whether data bytes are left (``data_more``) is set from the UDP length and
#: never cleared, so the bytes after the UDP length (a short frame's Ethernet padding, or an IP
#: payload longer than the UDP length) are written as data. ``"stale type"``: the packet's
#: type flags that gate the data's writes (``tuples_type``, ``load_type``) are taken at a
#: frame's first byte, so they hold the frame before's. ``None`` (always, outside those
#: tests): nothing broken.
BREAK_DATA: str | None = None


class _Header:
    """:class:`PayloadRx`'s registers for the frame being received and the tests on them."""

    def __init__(self, tuple_bytes: int):
        self.ptype = Signal(8)  # (combinational) the payload header's fields
        # the type is TUPLES, LOAD (registers: the data's write enables)
        self.tuples_type = Signal(reset_less=True)
        self.load_type = Signal(reset_less=True)
        self.seq = Signal(32)
        self.version_ok = Signal()
        self.engine_ok = Signal(reset_less=True)
        # (from the UDP length, every cycle) the payload fits the header, is a command's, a
        # PARAMS'
        self.long_enough = Signal(reset_less=True)
        self.command_ok = Signal(reset_less=True)
        self.params_ok = Signal(reset_less=True)
        # a LOAD: its offset and flags are there, it has bytes of the load; and its next
        # offset (where the load stands after it) and its bytes, at the frame's end
        self.load_ok = Signal(reset_less=True)
        self.load_data = Signal(reset_less=True)
        self.load_next = Signal(32, reset_less=True)
        self.load_bytes = Signal(16, reset_less=True)
        self.load_skip = Signal(range(LOAD_HEADER_BYTES + 1), reset_less=True)
        self.load_offset = Signal(32)  # (combinational) the LOAD's offset and flags
        self.load_flags = Signal(8)
        # the tuple data: at least one byte, the next byte's place in a tuple
        self.some = Signal(reset_less=True)
        self.phase = Signal(range(tuple_bytes), reset_less=True)
        # what the headers say, decided at the second byte after them (timing); `early`: before
        # the UDP length test, so that nothing overrides it
        self.cls = Signal(FrameClass, reset_less=True)
        self.kind = Signal(EventKind, reset_less=True)
        self.early = Signal(reset_less=True)
        # the session's tests, a byte at a time as the bytes pass (timing): the sender's IPv4
        # address and UDP port are the session's host's, the header carries its session id
        self.same_ip = Signal(reset_less=True)
        self.same_port = Signal(reset_less=True)
        self.same_session = Signal(reset_less=True)
        self.same = Signal(reset_less=True)  # the three, a cycle later
        self.session = Signal(32)  # (combinational) the header's session id


class Session:
    """The session :class:`PayloadRx` is bound to (registers in its domain): whether one is
    open, its host's IPv4 address and UDP port, its id, and the cycles since its host's last
    accepted packet."""

    def __init__(self, idle_cycles: int):
        self.open = Signal()
        self.ip = Signal(32, reset_less=True)
        self.port = Signal(16, reset_less=True)
        self.id = Signal(32, reset_less=True)
        self.idle = Signal(range(idle_cycles + 1))


class PayloadRx(Classify, wiring.Component):
    """Classifies the frames from a :class:`~.mac.MacRx`, with what the layers below found
    (``lower``), and writes the tuple bytes of TUPLES packets to a
    :class:`~nfacep.hdl.stream.PacketQueue`.

    It reads the payload header (:data:`~.headers.PAYLOAD`) and counts the bytes after it; the
    bytes of the payload after its header go to ``write`` (no backpressure: the queue raises
    ``overflow`` when one does not fit) when the packet is a TUPLES one. At ``end`` the frame's
    class (``FRAME_CLASSES`` of :mod:`nfacep.links.udp.protocol`) is decided from what was
    gathered (a cycle after ``end``: every test reads registers); a cycle later ``commit`` or
    ``rollback`` pulses and ``event`` carries the class and, for an accepted frame, its kind
    (:class:`~.payload.EventKind`), its ``seq`` and the sender's MAC, IP address and port.

    Members
    -------
    frame : ``In(frame_signature)``
    end, fcs_ok, size_ok, length : ``In``
        From :class:`~.mac.MacRx`.
    lower : ``In(LOWER)``
    write : ``Out(stream.Signature(8))``
        Always taken.
    commit, rollback : ``Out(1)``
    overflow : ``In(1)``
    event : ``Out(stream.Signature(event_layout(params_bytes)))``
        ``valid`` for one cycle per frame; ``ready`` is ignored (the events' FIFO is read
        every cycle and frames are at least 84 cycles apart).
    session_open : ``Out(1)``
        A session is open (:mod:`nfacep.links.udp.protocol`).

    Sessions: an accepted RESET opens one, bound to its sender's IPv4 address and UDP port
    and to the id it carries; it is accepted when no session is open or from the session's
    host with its id. Every other packet (TUPLES, STATUS_REQ, PARAMS, CLOSE) that passes the
    other tests is ``foreign`` unless from the session's host with its id. An accepted CLOSE,
    or ``idle_cycles`` cycles without an accepted packet of the session's, ends the session.

    With ``params_bytes`` (the engine's runtime parameters' bytes; 0: a PARAMS packet is a
    ``bad_header``), a PARAMS packet for this engine whose body is exactly the switch's tuple
    number and the values (else ``bad_udp``) is accepted, its body in the event's ``switch``;
    whether the engine takes it is decided after the crossing.

    With ``load`` (a programmable engine; else a LOAD is a ``bad_header``), a LOAD for this
    engine (no session of its own needed: while a session is alive from its host's IPv4
    address, any port, else ``foreign``; with none from any sender; one without bytes, which
    asks for STATUS only,
    whatever its ``engine_id``) is reassembled: its bytes after the offset and
    flags go to ``load_write`` (``data`` and ``last``: the flags' last bit on the chunk's final
    byte), committed with ``load_commit`` when it is accepted, when its offset is where the
    load stands (``bad_load`` else) and its bytes fit (``load_overflow``: ``engine_full``).
    A LOAD's event says whether it carries bytes (``load_data``) and how many (``seq``).
    """

    def __init__(
        self,
        *,
        engine_id: int,
        tuple_bytes: int,
        params_bytes: int = 0,
        offset: int = PAYLOAD_AT,
        idle_cycles: int = SESSION_IDLE_CYCLES,
        load: bool = False,
        icmp: bool = True,
    ):
        self._icmp = icmp
        if tuple_bytes < 1:
            raise ValueError("tuples must take at least one byte")
        if idle_cycles < 1:
            raise ValueError("a session's idle time is at least one cycle")
        self._idle_cycles = int(idle_cycles)
        self._engine_id = engine_id & 0xFFFFFFFF
        self._tuple_bytes = tuple_bytes
        self._params_bytes = int(params_bytes)
        self._offset = offset
        self._load = bool(load)
        load_members = {
            "load_write": Out(stream.Signature(data.StructLayout({"data": 8, "last": 1}))),
            "load_commit": Out(1),
            "load_rollback": Out(1),
            "load_overflow": In(1),
        }
        super().__init__(
            {
                **(load_members if load else {}),
                "frame": In(frame_signature),
                "end": In(1),
                "fcs_ok": In(1),
                "size_ok": In(1),
                "length": In(INDEX_BITS),
                "lower": In(LOWER),
                "write": Out(stream.Signature(8)),
                "commit": Out(1),
                "rollback": Out(1),
                "overflow": In(1),
                "event": Out(stream.Signature(event_layout(self._params_bytes, self._load))),
                "session_open": Out(1),
                "echo_addr": Out(INDEX_BITS),
                "echo_data": Out(8),
                "echo_we": Out(1),
                "echo_done": In(1),
            }
        )

    def _echo(self, m) -> Signal:
        """The echo buffer's writes: each frame's bytes from :data:`ECHO_AT` on, unless an
        accepted echo request's reply still waits to be sent (``busy``, from its event until
        ``echo_done``). Returns ``blocked``: the frame began while busy (its bytes were not all
        kept: an echo request is then ``engine_full``)."""
        busy = Signal()
        blocked = Signal(reset_less=True)
        ev = self.event
        answered = (
            ev.valid & (ev.payload.cls == FrameClass.ACCEPTED) & (ev.payload.kind == EventKind.ECHO)
        )
        with m.If(answered):
            m.d.sync += busy.eq(1)
        with m.Elif(self.echo_done):
            m.d.sync += busy.eq(0)
        on_bytes(m, self.frame, {0: [blocked.eq(busy)]})
        m.d.comb += [
            self.echo_we.eq(self.frame.valid & ~busy & (self.frame.index >= ECHO_AT)),
            self.echo_addr.eq(self.frame.index - ECHO_AT),
            self.echo_data.eq(self.frame.byte),
        ]
        return blocked

    def elaborate(self, platform):
        m = Module()
        h = _Header(self._tuple_bytes)
        s = Session(self._idle_cycles)
        switch = self._header(m, h)
        self._data(m, h)
        cls, kind, early = self._header_class(m, h)
        data_at = self._offset + PAYLOAD.length
        on_bytes(m, self.frame, {data_at + 1: [h.cls.eq(cls), h.kind.eq(kind), h.early.eq(early)]})
        self._same(m, h, s)
        # the verdict, a cycle after the frame's end, from registers only
        verdict = Signal()
        fcs_ok, size_ok, truncated, short = (Signal(reset_less=True) for _ in range(4))
        m.d.sync += verdict.eq(self.end)
        with m.If(self.end):
            m.d.sync += [
                fcs_ok.eq(self.fcs_ok),
                size_ok.eq(self.size_ok),
                truncated.eq(self.lower.ip_end > self.length),
                # an echo request too short for its identifier and sequence number
                short.eq(self.lower.ip_end < ECHO_AT + 4),
            ]
        self._expected_now = Signal(32, name="load_expected")
        blocked = self._echo(m) if self._icmp else None
        cls = self._verdict(m, h, s, (fcs_ok, size_ok, truncated, short), blocked)
        ev, lower = self.event, self.lower
        if self._load:
            self._reassemble(m, h, verdict, cls)
        m.d.sync += ev.valid.eq(verdict)
        echo = Cat(lower.ip_length, lower.icmp_checksum)
        seq = Mux(h.kind == EventKind.ECHO, echo, h.seq) if self._icmp else h.seq
        if self._load:
            seq = Mux(h.kind == EventKind.LOAD, h.load_bytes, seq)
        with m.If(verdict):
            m.d.sync += [
                ev.payload.cls.eq(cls),
                ev.payload.kind.eq(h.kind),
                ev.payload.seq.eq(seq),
                ev.payload.mac.eq(lower.mac),
                ev.payload.ip.eq(lower.ip),
                ev.payload.port.eq(lower.port),
                ev.payload.session.eq(h.session),
            ]
            if self._params_bytes:
                m.d.sync += ev.payload.switch.eq(switch)
            if self._load:
                m.d.sync += ev.payload.load_data.eq(h.load_data)
        self._session(m, s)
        # (from the event's registers: timing)
        accept_tuples = (ev.payload.cls == FrameClass.ACCEPTED) & (
            ev.payload.kind == EventKind.TUPLES
        )
        m.d.comb += [
            self.commit.eq(ev.valid & accept_tuples),
            self.rollback.eq(ev.valid & ~accept_tuples),
        ]
        if self._load:
            accept_load = (ev.payload.cls == FrameClass.ACCEPTED) & (
                ev.payload.kind == EventKind.LOAD
            )
            m.d.comb += [
                self.load_commit.eq(ev.valid & accept_load),
                self.load_rollback.eq(ev.valid & ~accept_load),
            ]
        return m

    def _reassemble(self, m, h, verdict, cls):
        """Where the load being received stands (``expected``): an accepted LOAD with bytes
        moves it past them, or to 0 (none) after the last chunk; the event carries it.

        Whether it moves and where to are registered at the verdict, and it moves a cycle
        later, as the event is offered (whose ``load_offset`` is where it stands then, a gate
        after those registers): so the verdict's class reaches one register, not the enables
        of the 32 bits of ``expected`` (timing; the next frame's verdict, which compares a
        LOAD's offset with ``expected``, comes many cycles later)."""
        expected = self._expected_now
        header_end = UDP.length + PAYLOAD.length + LOAD_HEADER_BYTES
        with m.If(self.end):
            m.d.sync += [
                h.load_next.eq(h.load_offset + self.lower.udp_length - header_end),
                h.load_bytes.eq(self.lower.udp_length - header_end),
            ]
        moves = Signal()
        target = Signal(32, reset_less=True)
        m.d.sync += moves.eq(
            verdict & (cls == FrameClass.ACCEPTED) & (h.kind == EventKind.LOAD) & h.load_data
        )
        with m.If(verdict):
            m.d.sync += target.eq(Mux(h.load_flags & LOAD_LAST, 0, h.load_next))
        with m.If(moves):
            m.d.sync += expected.eq(target)
        m.d.comb += self.event.payload.load_offset.eq(Mux(moves, target, expected))

    def _same(self, m, h, s):
        """``h.same_ip``, ``same_port`` and ``same_session``: the frame's IPv4 source, UDP
        source port and session id are the session's, compared a byte at a time as their
        bytes pass (:func:`~.packet.compare_bytes`), and ``h.same`` all three (a register:
        timing)."""
        udp_at = self._offset - UDP.length
        ip_at = udp_at - IPV4.length
        tests = (
            (h.same_ip, IPV4, ip_at, "src", s.ip),
            (h.same_port, UDP, udp_at, "src_port", s.port),
            (h.same_session, PAYLOAD, self._offset, "session", s.id),
        )
        for flag, header, at, field, value in tests:
            compare_bytes(m, self.frame, flag, at, header, field, value)
        m.d.sync += h.same.eq(h.same_ip & h.same_port & h.same_session)

    def _session(self, m, s):
        """Open, keep and end the session from the accepted events (their registers)."""
        ev = self.event.payload
        accepted = self.event.valid & (ev.cls == FrameClass.ACCEPTED)
        m.d.comb += self.session_open.eq(s.open)
        with m.If(s.idle == self._idle_cycles):
            m.d.sync += s.open.eq(0)
        with m.Elif(s.open):
            m.d.sync += s.idle.eq(s.idle + 1)
        keeps = (ev.kind != EventKind.ARP) & (ev.kind != EventKind.ECHO)
        with m.If(accepted & keeps & (ev.kind != EventKind.LOAD)):
            m.d.sync += s.idle.eq(0)
        with m.If(accepted & (ev.kind == EventKind.RESET)):
            m.d.sync += [s.open.eq(1), s.ip.eq(ev.ip), s.port.eq(ev.port), s.id.eq(ev.session)]
        with m.If(accepted & (ev.kind == EventKind.CLOSE)):
            m.d.sync += s.open.eq(0)

    def _header(self, m, h):
        """The payload header, its length tests, and a PARAMS packet's body (the switch,
        returned; None without ``params_bytes``)."""
        compare = {"version": ("version", VERSION)}
        m.submodules.header = header = Depacketizer(PAYLOAD, self._offset, compare)
        compare_bytes(
            m, self.frame, h.engine_ok, self._offset, PAYLOAD, "engine_id", self._engine_id
        )
        wiring.connect(m, wiring.flipped(self.frame), header.frame)
        f = header.fields
        m.d.comb += [
            h.ptype.eq(f.type),
            h.seq.eq(f.seq),
            h.session.eq(f.session),
            h.version_ok.eq(header.equal.version),
        ]
        udp_length, header_end = self.lower.udp_length, UDP.length + PAYLOAD.length
        pb = self._params_bytes
        tests = [
            h.long_enough.eq(udp_length >= header_end),
            h.command_ok.eq(udp_length == header_end),
            h.params_ok.eq(udp_length == header_end + SWITCH_BYTES + pb),
            h.load_ok.eq(udp_length >= header_end + LOAD_HEADER_BYTES),
            h.load_data.eq(udp_length > header_end + LOAD_HEADER_BYTES),
        ]
        # (every cycle, from the UDP header's register: no enable, timing; they hold this
        # frame's from two bytes after its UDP length, long before they are read)
        m.d.sync += tests
        # the type's compares that gate the data's writes, from the payload header's register
        # every cycle (timing: in the cycle of the write they fed the queues' write enables);
        # they hold this frame's from two bytes after its type, long before its data
        types = [
            h.tuples_type.eq(f.type == PacketType.TUPLES),
            h.load_type.eq(f.type == PacketType.LOAD),
        ]
        if BREAK_DATA == "stale type":
            on_bytes(m, self.frame, {0: types})
        else:
            m.d.sync += types
        if self._load:
            body = Header("load", {"offset": 4, "flags": 1}, byteorder="little")
            m.submodules.load = load = Depacketizer(body, self._offset + PAYLOAD.length)
            wiring.connect(m, wiring.flipped(self.frame), load.frame)
            m.d.comb += [h.load_offset.eq(load.fields.offset), h.load_flags.eq(load.fields.flags)]
        if not pb:
            return None
        body = Header("switch", {"switch": SWITCH_BYTES + pb}, byteorder="little")
        m.submodules.switch = switch = Depacketizer(body, self._offset + PAYLOAD.length)
        wiring.connect(m, wiring.flipped(self.frame), switch.frame)
        return switch.fields.switch

    def _data(self, m, h):
        """The bytes after the payload header to the UDP payload's end (counted down: timing):
        to ``write`` for a TUPLES packet; whether there is one and whether whole tuples.
        Whether any is left is a flag of its own, set with the count (timing: the count's
        16-bit compare with 0 fed the receive buffer's write enable in the same cycle)."""
        data_at = self._offset + PAYLOAD.length
        data_phase = Signal(reset_less=True)
        data_left = Signal(16, reset_less=True)
        data_more = Signal(reset_less=True)  # data_left != 0
        header_end = UDP.length + PAYLOAD.length
        udp_length = self.lower.udp_length
        left = Mux(udp_length >= header_end, udp_length - header_end, 0)
        on_bytes(
            m,
            self.frame,
            {
                0: [h.some.eq(0), h.phase.eq(0)],
                self._offset: [
                    data_left.eq(left),
                    data_more.eq(udp_length > header_end),
                    h.load_skip.eq(0),
                ],
                data_at - 1: [data_phase.eq(1)],
            },
        )
        tb = self._tuple_bytes
        in_data = Signal()
        m.d.comb += [
            in_data.eq(self.frame.valid & data_phase & data_more),
            self.write.valid.eq(in_data & h.tuples_type),
            self.write.payload.eq(self.frame.byte),
        ]
        if self._load:
            body = in_data & h.load_type & (h.load_skip == LOAD_HEADER_BYTES)
            m.d.comb += [
                self.load_write.valid.eq(body),
                self.load_write.payload.data.eq(self.frame.byte),
                self.load_write.payload.last.eq(
                    (h.load_flags & LOAD_LAST).any() & (data_left == 1)
                ),
            ]
            with m.If(in_data & (h.load_skip != LOAD_HEADER_BYTES)):
                m.d.sync += h.load_skip.eq(h.load_skip + 1)
        more = data_left != 1
        if BREAK_DATA == "data_more":
            more = Const(1)
        with m.If(in_data):
            m.d.sync += [
                h.some.eq(1),
                h.phase.eq(Mux(h.phase == tb - 1, 0, h.phase + 1)),
                data_left.eq(data_left - 1),
                data_more.eq(more),
            ]
        with m.If(self.end):  # (a frame shorter than its UDP length ends its data here)
            m.d.sync += data_phase.eq(0)
