"""The UDP link's events (:class:`LinkEvents`, a base of :class:`~.link.UdpLink`): every frame
received counted in its class, the TUPLES and PARAMS sequence check, the requests raised
(STATUS, RESET, ARP and echo replies) and where the answers go."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Signal
from amaranth.lib import data

from nfacep.links.udp.protocol import FRAME_CLASSES

from ..stream import gray
from .payload import EventKind

__all__ = ["BREAK_ANSWER", "COUNTERS", "ENDPOINT", "LinkEvents"]

#: For the tests that show the answer to a LOAD waits for its bytes: ``"early"`` answers a
#: LOAD with bytes as its event comes, as a LOAD without bytes, when its bytes may not be in
#: the engine yet; ``"no sender"``: the LOAD's sender and session are never taken (the
#: register that enables them a cycle after its event stays low), so that its answer goes
#: with another's session. ``None`` (always, outside those tests): as
#: :meth:`LinkEvents._load_answer`.
BREAK_ANSWER: str | None = None
#: Where an answer goes.
ENDPOINT = data.StructLayout({"mac": 48, "ip": 32, "port": 16})

#: The counters the link keeps (STATUS reports them, :data:`.payload.STATUS_FIELDS`).
COUNTERS = (
    "tuples",
    "matched",
    "drops",
    "records",
    "packets",
    "lost",
    "late",
    "echoes",
    *FRAME_CLASSES,
)


class LinkEvents:
    """The events of a :class:`~.link.UdpLink` (which sets the members and settings these
    read)."""

    def _peers(self, m, reset, event):
        """Who the answers go to: the session's host (the sender of an accepted RESET,
        ``reset``), an ARP request's sender, an echo request's."""
        with m.If(reset):
            m.d.sync += [
                self.peer.mac.eq(event.mac),
                self.peer.ip.eq(event.ip),
                self.peer.port.eq(event.port),
                self.session.eq(event.session),
            ]
        with m.If(self.arp_request):
            m.d.sync += [self.arp_peer.mac.eq(event.mac), self.arp_peer.ip.eq(event.ip)]
        with m.If(self.echo_request):  # (the next waits until this reply is out)
            m.d.sync += [
                self.echo_peer.mac.eq(event.mac),
                self.echo_peer.ip.eq(event.ip),
                self.echo_length.eq(event.seq[:16]),
                self.echo_checksum.eq(event.seq[16:]),
            ]

    def _asker(self, m, valid, event, answer):
        """Where STATUS goes: to whoever asked for it (the session's host; a LOAD's sender,
        any station), with its session id, or with ``answer`` to the LOAD whose bytes are now
        in the engine (:meth:`_load_answer`); and where the load being received stands."""
        self._status_peer = Signal(ENDPOINT)
        self._status_session = Signal(32)
        self._status_numbered = Signal()
        self._load_offset = Signal(32)
        # (the request and the answer's cycle registered: they enable and steer these
        # registers a cycle later, from flip-flops, not from the event's decode, which reached
        # their 128 enables through a LUT of its own and far routing: timing, the link clock's
        # slowest path. The event's fields stay until the next event, many cycles away; the
        # transmit side takes the request from the same register, and these a cycle later)
        self._status_asked = asked = Signal()
        answered = Signal()
        m.d.sync += [asked.eq(self.status_request), answered.eq(answer)]
        peer = Cat(event.mac, event.ip, event.port)
        session = event.session
        if self._load:  # (``answer`` comes in no cycle of an event, so of no other request)
            peer = Mux(answered, self._load_peer, peer)
            session = Mux(answered, self._load_session, session)
        with m.If(asked):
            m.d.sync += [
                self._status_numbered.eq((event.kind != EventKind.LOAD) & ~answered),
                self._status_peer.eq(peer),
                self._status_session.eq(session),
            ]
        if self._load:
            with m.If(valid):
                m.d.sync += self._load_offset.eq(event.load_offset)

    def _load_answer(self, m, chunk, valid, event):
        """The answer to an accepted LOAD with bytes (``chunk``; its event's ``seq`` holds
        how many), once they are all in the engine: ``received`` counts the bytes of those
        LOADs (modulo ``2**len(config_taken)``), and the answer waits until ``config_taken``
        (the bytes the engine took, a load's last one once the engine checked the load)
        reaches it. Only the last such LOAD's sender is kept: one that comes while an earlier
        one's answer waits takes its place. The answer is made in no cycle of an event
        (``valid``), so that no other request takes its place nor it another's. Returns the
        cycle it is made, from registers only (timing: it selects what 128 flip-flops of
        the asker take).

        The count's compare is registered (timing), and false in the cycle after an event,
        when it compared the count before a LOAD's bytes; ``config_taken`` never passes
        ``received``, so a compare true a cycle ago holds until another LOAD comes. Nothing
        here is reset by RESET: the load bytes on their way survive it."""
        width = len(self.config_taken)
        received = Signal(width)
        waits, taken = Signal(), Signal()
        answer = Signal()
        self._load_peer = Signal(ENDPOINT)
        self._load_session = Signal(32)
        m.d.sync += taken.eq((gray(received, width) == self.config_taken) & ~valid)
        m.d.comb += answer.eq(waits & taken & ~valid)
        with m.If(chunk):
            m.d.sync += [received.eq(received + event.seq[:width]), waits.eq(1)]
        with m.Elif(answer):
            m.d.sync += waits.eq(0)
        # the sender and session a cycle after the event, enabled from a register, not from
        # the event's decode, which reached their 128 enables (timing: the link clock's
        # slowest path beside the SDRAM store); the event's fields stay until the next event,
        # and the earliest answer comes two cycles after this one's (``taken`` is false in
        # the cycle after an event)
        took = Signal()
        m.d.sync += took.eq(chunk if BREAK_ANSWER != "no sender" else 0)
        with m.If(took):
            m.d.sync += [
                self._load_peer.mac.eq(event.mac),
                self._load_peer.ip.eq(event.ip),
                self._load_peer.port.eq(event.port),
                self._load_session.eq(event.session),
            ]
        return answer

    def _asked(self, m, accepted, event):
        """``(chunk, asked)``: an accepted LOAD with bytes, answered once they are in the
        engine (:meth:`_load_answer`), and the accepted frames answered at once (STATUS_REQ,
        RESET, CLOSE and a LOAD without bytes)."""
        kind = event.kind
        chunk = Signal()
        if self._load and BREAK_ANSWER != "early":
            m.d.comb += chunk.eq(accepted & (kind == EventKind.LOAD) & event.load_data)
        asked = Signal()
        m.d.comb += asked.eq(
            accepted
            & (
                (kind == EventKind.STATUS_REQ)
                | (kind == EventKind.RESET)
                | (kind == EventKind.CLOSE)
                | (kind == EventKind.LOAD)
            )
            & ~chunk
        )
        return chunk, asked

    def _events(self, m, valid, event):
        """Count each frame in its class, check TUPLES' ``seq``, raise the requests."""
        counts = {name: Signal(name=f"pulse_{name}") for name in COUNTERS}
        accepted = valid & (event.cls == 0)
        kind = event.kind
        tuples_packet = accepted & (kind == EventKind.TUPLES)
        refused = Signal()  # an accepted PARAMS packet while a switch is pending
        if self._params_bytes:
            params_packet = accepted & (kind == EventKind.PARAMS)
            busy = self.o_params.valid | ~self.o_params.ready
            m.d.comb += refused.eq(params_packet & busy)
            with m.If(self.o_params.ready | self.reset_request):
                m.d.sync += self.o_params.valid.eq(0)
            with m.If(params_packet & ~busy):
                m.d.sync += [self.o_params.valid.eq(1), self.o_params.payload.eq(event.switch)]
            # (in sequence with the TUPLES packets)
            tuples_packet = tuples_packet | (params_packet & ~busy)
        gap = Signal(32)
        m.d.comb += gap.eq(event.seq - self.next_seq)
        behind = gap[31]
        # (registered: ``lost``'s add of the gap and ``late``'s pulse a cycle after the event,
        # from registers, not the event decoded through the gap's carry chain into the
        # counters' enables: timing, the link clock's slowest path at 2 partitions; next_seq
        # still moves at once, so the next event's gap is right; RESET's cycle forgets them)
        add_lost, late, lost_gap = Signal(), Signal(), Signal(32)
        m.d.sync += [
            add_lost.eq(tuples_packet & ~behind & ~self.reset_request),
            late.eq(tuples_packet & behind & ~self.reset_request),
            lost_gap.eq(gap),
        ]
        chunk, asked = self._asked(m, accepted, event)
        answer = self._load_answer(m, chunk, valid, event) if self._load else Const(0)
        m.d.comb += [
            counts["tuples"].eq(self.o_stream.valid & self.o_stream.ready),
            counts["late"].eq(late),
            self.status_request.eq(asked | answer),
            self.arp_request.eq(accepted & (kind == EventKind.ARP)),
            self.echo_request.eq(accepted & (kind == EventKind.ECHO)),
            counts["echoes"].eq(self.echo_request),
        ]
        # (registered: it resets the counters, the engine and the record FIFO; timing)
        m.d.sync += self.reset_request.eq(accepted & (kind == EventKind.RESET))
        for i, name in enumerate(FRAME_CLASSES):
            m.d.comb += counts[name].eq(valid & (event.cls == i))
        m.d.comb += [
            counts["accepted"].eq(accepted & ~refused),
            counts["engine_full"].eq(
                (valid & (event.cls == FRAME_CLASSES.index("engine_full"))) | refused
            ),
        ]
        for name in COUNTERS:
            if name == "lost":
                continue
            counter = getattr(self.counters, name)
            with m.If(counts[name]):
                m.d.sync += counter.eq(counter + 1)
        with m.If(add_lost):
            m.d.sync += self.counters.lost.eq(self.counters.lost + lost_gap)
        with m.If(tuples_packet & ~behind):
            m.d.sync += self.next_seq.eq(event.seq + 1)
        self._peers(m, accepted & (kind == EventKind.RESET), event)
        self._asker(m, valid, event, answer)
        with m.If(self.reset_request):  # RESET zeroes the counts (its own frame's included)
            m.d.sync += [getattr(self.counters, name).eq(0) for name in COUNTERS]
            m.d.sync += self.next_seq.eq(0)
        self._leds(m, counts, tuples_packet, event)
        return counts

    def _leds(self, m, counts, tuples_packet, event):
        """The LEDs' ``activity`` (a frame accepted) and ``trouble`` (a frame refused, a drop,
        a TUPLES packet out of sequence), registered here, beside the sequence check, for the
        LEDs far away (timing). The transmit side's drops pulse through a register of its own
        first, it comes from afar; a packet lost or late upstream, its seq not the one
        expected, is an equality compare into a register of its own, not the gap's
        subtraction, a carry chain (timing, the link clock's slowest path beside the
        programmable engine)."""
        drops, out_of_order = Signal(), Signal()
        m.d.sync += [
            drops.eq(counts["drops"]),
            out_of_order.eq(tuples_packet & (event.seq != self.next_seq)),
            self.activity.eq(counts["accepted"]),
            self.trouble.eq(
                out_of_order | drops | Cat(counts[name] for name in FRAME_CLASSES[1:]).any()
            ),
        ]
