"""The UDP link as one component in the engine's clock domain (:class:`UdpLink`): the receive
path (:class:`~.rx.EthRx`) in the receive clock's domain, crossed with
:class:`~nfacep.hdl.stream.ReadAheadAsyncFIFO`; the events' counters, the packet sequence check
and the requests in the link's own (:class:`~.link_events.LinkEvents`); the transmit side out on
GMII. The engine behind it, board-independent, is :class:`~.top.UdpTop`.
"""

from __future__ import annotations

from amaranth.hdl import (
    ClockDomain,
    ClockSignal,
    DomainRenamer,
    Module,
    ResetSignal,
    Signal,
)
from amaranth.lib import data, stream, wiring
from amaranth.lib.cdc import FFSynchronizer, PulseSynchronizer, ResetSynchronizer
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from nfacep.links.protocol import SWITCH_BYTES, params_bytes
from nfacep.links.udp.protocol import SESSION_IDLE_CYCLES

from ..stream import ReadAheadAsyncFIFO, SkidBuffer, StreamQueue, cross
from .headers import INDEX_BITS
from .link_events import COUNTERS, ENDPOINT, LinkEvents
from .mac import MacTx
from .payload import event_layout
from .payload_tx import UdpTx
from .rx import LOAD_BYTE, LOAD_CAPACITY, EthRx

__all__ = ["CAPACITY", "GMII_MEMBERS", "LOAD_COUNT_BITS", "UdpLink"]

#: Bytes of the receive buffer: two ECP5 block RAMs, room for two full frames of tuples.
CAPACITY = 4096
#: The GMII pins, of the link and of the board top alike: the receive clock and side in, the
#: transmit side out (its clock is the link's own ``sync``).
GMII_MEMBERS = {
    "rx_clk": In(1),
    "rxd": In(8),
    "rx_dv": In(1),
    "rx_er": In(1),
    "txd": Out(8),
    "tx_en": Out(1),
    "tx_er": Out(1),
}

#: Tuples the clock-domain crossing holds.
TUPLE_FIFO_DEPTH = 16
#: The load bytes the clock-domain crossing holds.
LOAD_FIFO_DEPTH = 16
#: The bits of the counts of load bytes (``UdpLink.config_taken``): more than the bytes that can
#: be on their way into the engine (the receive buffer of loads, two crossings and the
#: registers around them), so that the counts compare modulo their range.
LOAD_COUNT_BITS = (LOAD_CAPACITY + 4 * LOAD_FIFO_DEPTH).bit_length()


class UdpLink(LinkEvents, wiring.Component):
    """The UDP link: tuples from UDP packets on a GMII receive interface (``rx_clk`` its clock)
    to ``o_stream``, in the ``sync`` domain; records from ``i_stream`` in RECORDS packets,
    STATUS and ARP replies out on the GMII transmit interface (clocked by ``sync``).

    Every frame received becomes one event, crossed into ``sync``: it counts in its class; an
    accepted TUPLES packet updates the sequence check: a ``seq`` at or after ``next_seq`` sets
    ``next_seq`` to ``seq + 1`` and adds the jump to ``lost`` (a cycle later); one behind it (by
    up to 2**31) counts in ``late`` (a cycle later) and leaves ``next_seq`` alone, so without
    duplicates ``lost - late`` packets are missing; an accepted STATUS_REQ, RESET or ARP
    request pulses ``status_request``, ``reset_request`` (a cycle later; RESET also zeroes the
    counters and ``next_seq``) or ``arp_request``; an accepted CLOSE pulses
    ``status_request``; an accepted ICMP echo request pulses ``echo_request`` (its sender in
    ``echo_peer``, its IPv4 length and ICMP checksum in ``echo_length`` and ``echo_checksum``)
    and counts in ``echoes``.
    The sender of an accepted RESET, the session's host, becomes ``peer`` (where records and
    STATUS go) and its session id ``session`` (in every packet sent); the receive path refuses
    every other host's packets (``foreign``, :class:`~.payload_rx.PayloadRx`), so nothing else
    changes them. An ARP request's sender is ``arp_peer``.

    With ``params_bits`` (the engine's runtime parameters; 0: none), an accepted PARAMS packet
    is checked in sequence as TUPLES are and its switch is offered on ``o_params`` (to the
    engine's ``i_params``) when the engine takes one (``o_params.ready``, nothing offered);
    when a switch is still pending it counts as ``engine_full`` instead of ``accepted`` and is
    dropped (``next_seq`` stays). STATUS ends with ``param_values``.

    Members
    -------
    rx_clk, rxd, rx_dv, rx_er : ``In``
        GMII, receive side.
    o_stream : ``Out(stream.Signature(tuple_layout))``
    txd, tx_en, tx_er : ``Out``
        GMII, transmit side, clocked by ``sync``.
    i_stream : ``In(stream.Signature(record_layout))``
        The engine's records, sent in RECORDS packets (:class:`~.payload_tx.UdpTx`).
    engine_reset : ``Out(1)``
        Pulses with an accepted RESET: reset the engine with it.
    counters : ``Out(...)``
        One 32-bit ``Out`` per name in :data:`COUNTERS` (STATUS sends them).
    next_seq : ``Out(32)``
    rx_empty : ``Out(1)``
        Nothing waits in the receive path (synchronised: a few cycles late).
    status_request, reset_request, arp_request : ``Out(1)``
    activity, trouble : ``Out(1)``
        Pulse (a cycle after the count, two for a packet out of sequence or a drop) with a
        frame accepted; with a frame refused (any class but ``accepted``), a TUPLES packet
        lost or late upstream, or a tuple the engine dropped (for the LEDs).
    engine_busy : ``In(1)``
        Something waits between ``o_stream``/``i_stream`` and the engine (a clock-domain
        crossing): STATUS's ``idle`` waits for it as for the engine (0 when nothing does).
    peer, arp_peer : ``Out(data.StructLayout({"mac": 48, "ip": 32, "port": 16}))``
    session : ``Out(32)``
    o_params : ``Out(stream.Signature(48 + 8 * ceil(params_bits / 8)))``
        With ``params_bits``: a switch, the tuple number in the low 48 bits, the values above.
    param_values : ``In(params_bits)``
        With ``params_bits``: the engine's values in force, for STATUS.
    o_config : ``Out(stream.Signature(LOAD_BYTE))``
        With ``load`` (a programmable engine): the bytes of the loads (the engine's
        ``i_config``), crossed from the receive clock's domain as the tuples are. An accepted
        LOAD (from the session host's IPv4 address while a session is alive, else from any
        sender) is answered with STATUS to its sender: one without bytes at once, one with
        bytes once ``config_taken`` counts them (an accepted LOAD with bytes that comes while
        an earlier one's answer waits takes its place: the earlier one goes unanswered).
    image, refused, image_from : ``In(64)``, ``In(32)``, ``In(32)``
        With ``load``: the engine's image in force, loads refused and the first tuple the
        image in force judged, for STATUS.
    config_taken : ``In(LOAD_COUNT_BITS)``
        With ``load``: the bytes of ``o_config`` the engine took, modulo
        ``2**LOAD_COUNT_BITS``, in Gray code, a load's last byte counted once the engine
        checked the load (``image``, ``refused`` and ``image_from`` tell its outcome by
        then); it survives RESET, as the load bytes on their way to the engine do.
    """

    def __init__(
        self,
        tuple_layout: data.StructLayout,
        record_layout: data.StructLayout,
        *,
        mac: bytes,
        ip: bytes,
        port: int,
        engine_id: int,
        capacity: int = CAPACITY,
        quiet: int = 64,
        flush: int = 1024,
        params_bits: int = 0,
        idle_cycles: int = SESSION_IDLE_CYCLES,
        engine_fields: dict[str, int] | None = None,
        load: bool = False,
        icmp: bool = True,
    ):
        self._load = bool(load)
        self._tuple_layout = tuple_layout
        self._icmp = icmp
        self._record_layout = record_layout
        self._params_bytes = params_bytes(params_bits)
        self._rx_args = {
            "tuple_width": tuple_layout.size,
            "capacity": capacity,
            "mac": mac,
            "ip": ip,
            "port": port,
            "engine_id": engine_id,
            "params_bytes": self._params_bytes,
            "idle_cycles": idle_cycles,
            "load": self._load,
            "icmp": icmp,
        }
        self._tx_args = {
            "mac": mac,
            "ip": ip,
            "port": port,
            "engine_id": engine_id,
            "tuple_bytes": (tuple_layout.size + 7) // 8,
            "capacity": capacity,
            "counters": COUNTERS,
            "flush": flush,
            "params_bits": params_bits,
            "engine_fields": engine_fields,
            "echo": icmp,
        }
        self._quiet = max(int(quiet), 2)
        super().__init__(self._members(tuple_layout, record_layout, params_bits))

    def _members(self, tuple_layout, record_layout, params_bits: int) -> dict:
        """The component's ports (the class's description)."""
        members = {
            **GMII_MEMBERS,
            "o_stream": Out(stream.Signature(tuple_layout)),
            "i_stream": In(stream.Signature(record_layout)),
            "engine_reset": Out(1),
            "counters": Out(wiring.Signature({name: Out(32) for name in COUNTERS})),
            "next_seq": Out(32),
            "rx_empty": Out(1),
            "status_request": Out(1),
            "reset_request": Out(1),
            "arp_request": Out(1),
            "peer": Out(ENDPOINT),
            "session": Out(32),
            "arp_peer": Out(ENDPOINT),
            "echo_request": Out(1),
            "echo_peer": Out(ENDPOINT),
            "echo_length": Out(16),
            "echo_checksum": Out(16),
            "activity": Out(1),
            "trouble": Out(1),
            "engine_busy": In(1),
        }
        if params_bits:
            members["o_params"] = Out(stream.Signature(8 * (SWITCH_BYTES + self._params_bytes)))
            members["param_values"] = In(params_bits)
        if self._load:
            members["o_config"] = Out(stream.Signature(LOAD_BYTE))
            members["image"] = In(64)
            members["refused"] = In(32)
            members["image_from"] = In(32)
            members["config_taken"] = In(LOAD_COUNT_BITS)
        return members

    def elaborate(self, platform):
        m = Module()
        m.domains.eth_rx = ClockDomain("eth_rx", local=True)
        m.d.comb += ClockSignal("eth_rx").eq(self.rx_clk)
        m.submodules.rx_reset = ResetSynchronizer(ResetSignal("sync"), domain="eth_rx")
        m.submodules.rx = rx = DomainRenamer("eth_rx")(EthRx(**self._rx_args))
        m.d.comb += [rx.rxd.eq(self.rxd), rx.rx_dv.eq(self.rx_dv), rx.rx_er.eq(self.rx_er)]

        # (the tuples' and the loads' ready from a register: timing)
        tuples = cross(
            m,
            "tuple_fifo",
            rx.o_stream,
            self.o_stream,
            depth=TUPLE_FIFO_DEPTH,
            w_domain="eth_rx",
            r_domain="sync",
        )
        if self._load:
            cross(
                m,
                "load_fifo",
                rx.o_load,
                self.o_config,
                depth=LOAD_FIFO_DEPTH,
                w_domain="eth_rx",
                r_domain="sync",
            )
        layout = event_layout(self._params_bytes, self._load)
        # (read ahead: the read side registers only; timing)
        m.submodules.event_fifo = events = ReadAheadAsyncFIFO(
            width=layout.size, depth=5, w_domain="eth_rx", r_domain="sync"
        )
        m.d.comb += [
            events.w_en.eq(rx.event.valid),
            events.w_data.eq(rx.event.payload),
            rx.event.ready.eq(events.w_rdy),
            events.r_en.eq(1),
        ]
        # (registered: the FIFO's read side decodes Gray counters; timing)
        event_valid = Signal()
        event = Signal(layout.size, reset_less=True)
        m.d.sync += [event_valid.eq(events.r_rdy), event.eq(events.r_data)]
        empty = Signal()
        m.submodules.empty_sync = FFSynchronizer(rx.empty, empty, init=1)
        m.d.comb += self.rx_empty.eq(empty & ~tuples.r_rdy)
        count = self._events(m, event_valid, data.View(layout, event))
        tx = self._transmit(m, count)
        if self._icmp:
            self._echo_buffer(m, rx, tx)
        return m

    def _echo_buffer(self, m, rx, tx):
        """The echo buffer (a block RAM of a frame's bytes): written in the receive clock's
        domain, read by the transmit side; ``echo_done`` crosses back to free it."""
        m.submodules.echo_buffer = memory = Memory(shape=8, depth=2**INDEX_BITS, init=[])
        write = memory.write_port(domain="eth_rx")
        read = memory.read_port(domain="sync")
        m.submodules.echo_done = done = PulseSynchronizer(i_domain="sync", o_domain="eth_rx")
        m.d.comb += [
            write.addr.eq(rx.echo_addr),
            write.data.eq(rx.echo_data),
            write.en.eq(rx.echo_we),
            read.addr.eq(tx.echo_addr),
            tx.echo_data.eq(read.data),
            done.i.eq(tx.echo_done),
            rx.echo_done.eq(done.o),
        ]

    def _transmit(self, m, count):
        """Records, STATUS and ARP replies out on GMII (the ``sync`` domain is the transmit
        clock's); STATUS's ``idle``: nothing waits in the receive path, nothing went into or
        came out of the engine for ``quiet`` cycles, no record waits."""
        m.submodules.udp_tx = tx = UdpTx(self._record_layout, **self._tx_args)
        m.submodules.mac_tx = mac = MacTx()
        # a small FIFO between the packet's byte multiplexers and the MAC's state machine
        # (timing: the MAC's state does not reach UdpTx); it passes a byte a cycle, so the
        # frame's bytes stay back to back. Before it a skid buffer, whose ready, which
        # enables every shift register of UdpTx (STATUS's ~900 flip-flops), is a register
        # (timing: the FIFO's level and its compare, and its level's adder from UdpTx's
        # valid, were the link clock's slowest paths)
        shape = tx.o_stream.payload.shape()
        m.submodules.tx_skid = skid = SkidBuffer(shape)
        m.submodules.tx_buffer = buffer = StreamQueue(shape, depth=4)
        wiring.connect(m, wiring.flipped(self.i_stream), tx.i_stream)
        wiring.connect(m, tx.o_stream, skid.i_stream)
        wiring.connect(m, skid.o_stream, buffer.i_stream)
        wiring.connect(m, buffer.o_stream, mac.i_stream)
        # (registered, by LinkEvents._asker: the event's decode and the transmit side's
        # request flag are placed far apart; timing. The asker's registers take their values
        # at the edge the transmit side takes the request, which reads them a cycle later at
        # the earliest; RESET's clear is in place by then.)
        status_request = self._status_asked
        m.d.comb += [
            self.txd.eq(mac.txd),
            self.tx_en.eq(mac.tx_en),
            self.tx_er.eq(mac.tx_er),
            tx.arp_request.eq(self.arp_request),
            tx.arp_peer.eq(self.arp_peer),
            tx.echo_request.eq(self.echo_request),
            tx.echo_peer.eq(self.echo_peer),
            tx.echo_length.eq(self.echo_length),
            tx.echo_checksum.eq(self.echo_checksum),
            tx.status_request.eq(status_request),
            tx.status_peer.eq(self._status_peer),
            tx.status_session.eq(self._status_session),
            tx.status_numbered.eq(self._status_numbered),
            tx.peer.eq(self.peer),
            tx.session.eq(self.session),
            tx.clear.eq(self.reset_request),
            tx.next_seq.eq(self.next_seq),
            self.engine_reset.eq(self.reset_request),
        ]
        for name in COUNTERS:
            m.d.comb += getattr(tx.counters, name).eq(getattr(self.counters, name))
        if self._params_bytes:
            m.d.comb += tx.params.eq(self.param_values)
        if self._load:
            m.d.comb += [
                tx.image.eq(self.image),
                tx.refused.eq(self.refused),
                tx.image_from.eq(self.image_from),
                tx.load_offset.eq(self._load_offset),
            ]
        # (registered: the transmit side's pulses come from its state machine, far from the
        # 32-bit counters they enable: timing, the link clock's slowest path beside the SDRAM
        # store; a cycle late, long before a later STATUS loads the counters; RESET's cycle
        # still forgets them)
        for name in ("matched", "drops", "records", "packets"):
            m.d.sync += count[name].eq(getattr(tx.count, name) & ~self.reset_request)
        quiet = Signal(range(self._quiet + 1))
        with m.If(self.o_stream.valid | self.i_stream.valid | ~self.rx_empty | self.engine_busy):
            m.d.sync += quiet.eq(0)
        with m.Elif(quiet != self._quiet):
            m.d.sync += quiet.eq(quiet + 1)
        m.d.comb += tx.idle.eq(quiet == self._quiet)
        return tx
