"""The classification of a received frame (:class:`Classify`, a base of
:class:`~.payload_rx.PayloadRx`): its class from what the headers say, a cycle after them, and
the verdict at its end from the frame's checks."""

from __future__ import annotations

from amaranth.hdl import Const, Mux, Signal

from nfacep.links.udp.protocol import (
    PacketType,
)

from .payload import EventKind, FrameClass

__all__ = ["Classify"]


class Classify:
    """A received frame's class and verdict (for :class:`~.payload_rx.PayloadRx`, which sets
    the members and registers these read)."""

    def _header_class(self, m, h):
        """The class the headers give, what the frame asks for, and whether the class is
        decided before the UDP length test."""
        lower, ptype = self.lower, h.ptype
        is_tuples = ptype == PacketType.TUPLES
        is_params = (ptype == PacketType.PARAMS) if self._params_bytes else Const(0)
        is_load = (ptype == PacketType.LOAD) if self._load else Const(0)
        command = (
            (ptype == PacketType.STATUS_REQ)
            | (ptype == PacketType.RESET)
            | (ptype == PacketType.CLOSE)
        )
        cls = Signal(FrameClass)
        kind = Signal(EventKind)
        early = Signal()
        C = FrameClass
        with m.If(ptype == PacketType.STATUS_REQ):
            m.d.comb += kind.eq(EventKind.STATUS_REQ)
        with m.Elif(ptype == PacketType.RESET):
            m.d.comb += kind.eq(EventKind.RESET)
        with m.Elif(ptype == PacketType.CLOSE):
            m.d.comb += kind.eq(EventKind.CLOSE)
        with m.Elif(is_params):
            m.d.comb += kind.eq(EventKind.PARAMS)
        with m.Elif(is_load):
            m.d.comb += kind.eq(EventKind.LOAD)
        m.d.comb += early.eq(1)
        with m.If(~lower.for_us):
            m.d.comb += cls.eq(C.NOT_FOR_US)
        with m.Elif(lower.arp):
            m.d.comb += [
                cls.eq(Mux(lower.arp_request, C.ACCEPTED, C.NOT_FOR_US)),
                kind.eq(EventKind.ARP),
            ]
        icmp = lower.icmp if self._icmp else Const(0)
        with m.Elif(~lower.ip_for_us | ~(lower.udp | icmp)):
            m.d.comb += cls.eq(C.NOT_FOR_US)
        with m.Elif(~lower.ip_supported):
            m.d.comb += cls.eq(C.IP_UNSUPPORTED)
        with m.Elif(~lower.ip_checksum_ok):
            m.d.comb += cls.eq(C.BAD_IP_CHECKSUM)
        with m.Elif(lower.ip_fragment):
            m.d.comb += cls.eq(C.IP_FRAGMENT)
        if self._icmp:
            with m.Elif(lower.icmp):  # an echo request: its lengths and room at the verdict
                m.d.comb += [
                    cls.eq(Mux(lower.echo_request, C.ACCEPTED, C.NOT_FOR_US)),
                    kind.eq(EventKind.ECHO),
                    early.eq(~lower.echo_request),
                ]
        with m.Elif(~lower.port_ok):
            m.d.comb += cls.eq(C.NOT_FOR_US)
        with m.Else():
            m.d.comb += early.eq(0)
            with m.If(~lower.udp_length_ok | ~h.long_enough):
                m.d.comb += cls.eq(C.BAD_UDP)
            with m.Elif(
                ~h.version_ok
                | ~(is_tuples | command | is_params | is_load)
                | ((is_tuples | is_params | (is_load & h.load_data)) & ~h.engine_ok)
            ):
                m.d.comb += cls.eq(C.BAD_HEADER)
            with m.Else():
                m.d.comb += cls.eq(C.ACCEPTED)
        return cls, kind, early

    def _verdict(self, m, h, s, ends, blocked):
        """The frame's class at its end, from registers: the headers' class
        (:meth:`_header_class`), the MAC's verdict, the length, the tuple data and the
        session ``s``; for an echo request its length (at least the ICMP header, the
        identifier and the sequence number) and whether the echo buffer was free
        (``blocked``). ``ends``: the flags registered at the frame's end (the MAC's FCS and
        size checks, the IPv4 length beyond the frame's, an echo request too short)."""
        fcs_ok, size_ok, truncated, short = ends
        C = FrameClass
        cls = Signal(FrameClass)
        reset = h.kind == EventKind.RESET
        command = (h.kind == EventKind.STATUS_REQ) | reset | (h.kind == EventKind.CLOSE)
        bound = s.open & h.same
        params = h.kind == EventKind.PARAMS
        load = (h.kind == EventKind.LOAD) if self._load else Const(0)
        # (registered every cycle, from terms that hold from the frame's last byte: at the
        # verdict they are this frame's, and the verdict reads registers only, timing) the UDP
        # length against what the frame asks for and its tuple data; a LOAD's offset against
        # where the load stands (which moves only at a verdict)
        length_bad = Signal(reset_less=True)
        m.d.sync += length_bad.eq(
            Mux(
                command,
                ~h.command_ok,
                Mux(params, ~h.params_ok, Mux(load, ~h.load_ok, ~h.some | (h.phase != 0))),
            )
        )
        misplaced = Signal(reset_less=True)
        load_full = Const(0)
        if self._load:
            m.d.sync += misplaced.eq(h.load_data & (h.load_offset != self._expected_now))
            load_full = self.load_overflow
        with m.If(~size_ok):
            m.d.comb += cls.eq(C.BAD_SIZE)
        with m.Elif(~fcs_ok):
            m.d.comb += cls.eq(C.BAD_FCS)
        with m.Elif(h.early):
            m.d.comb += cls.eq(h.cls)
        with m.Elif(truncated):
            m.d.comb += cls.eq(C.BAD_UDP)
        with m.Elif(h.cls != C.ACCEPTED):
            m.d.comb += cls.eq(h.cls)
        if self._icmp:
            with m.Elif(h.kind == EventKind.ECHO):
                full = Mux(blocked, C.ENGINE_FULL, C.ACCEPTED)
                m.d.comb += cls.eq(Mux(short, C.BAD_UDP, full))
        with m.Elif(length_bad):
            m.d.comb += cls.eq(C.BAD_UDP)
        # (a LOAD: while a session is alive, only from its host's IPv4 address, any port)
        with m.Elif(Mux(load, s.open & ~h.same_ip, ~bound & ~(reset & ~s.open))):
            m.d.comb += cls.eq(C.FOREIGN)
        with m.Elif(load & misplaced):
            m.d.comb += cls.eq(C.BAD_LOAD)
        with m.Elif(Mux(load, load_full, ~command & ~params & self.overflow)):
            m.d.comb += cls.eq(C.ENGINE_FULL)
        with m.Else():
            m.d.comb += cls.eq(C.ACCEPTED)
        return cls
