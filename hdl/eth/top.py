"""The engine behind the UDP link, board-independent (:class:`UdpTop`): the link's GMII ports,
the engine in the link's clock domain or in one of its own, and the crossings between them
(tuples, records, runtime parameter switches and their values, loads, resets, idleness)."""

from __future__ import annotations

from amaranth.hdl import (
    Cat,
    ClockDomain,
    ClockSignal,
    Const,
    DomainRenamer,
    Module,
    ResetSignal,
    Signal,
)
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer, ResetSynchronizer
from amaranth.lib.fifo import AsyncFIFO
from amaranth.lib.wiring import In, Out

from nfacep.links.protocol import SWITCH_BYTES

from ..stream import ReadAheadAsyncFIFO, cross, gray
from .link import CAPACITY, GMII_MEMBERS, LOAD_COUNT_BITS, LOAD_FIFO_DEPTH, UdpLink

__all__ = ["UdpTop"]

#: The bits of a value crossing into ``sync`` compared by one flip-flop (``UdpTop._agreed``).
AGREE_GROUP = 16


class UdpTop(wiring.Component):
    """``engine`` behind a :class:`UdpLink`: the ports are GMII's (receive side clocked by
    ``rx_clk``, transmit side by the ``sync`` domain, the link's). An accepted RESET resets
    the engine. A programmable engine (:class:`~nfacep.hdl.programmable.ProgrammableEngine`)
    takes its loads from LOAD packets (its configuration, the image in force, survives RESET).

    Without ``engine_clock`` the engine runs in ``sync`` too. With it, the engine runs in a
    clock domain of its own, clocked by the ``engine_clk`` port at any frequency (the board top
    gives it one from a PLL, fast enough for the line: :mod:`nfacep.links.udp.top`), and
    everything crosses in asynchronous FIFOs (:class:`~nfacep.hdl.stream.ReadAheadAsyncFIFO`,
    its read side registers only, where the link's clock reads, and for the load bytes;
    :class:`~amaranth.lib.fifo.AsyncFIFO` for the tuples and switches into the engine):

    - tuples into the engine (the link counts a tuple in ``tuples`` when it enters the
      crossing); a full crossing stalls the link's tuples, the receive buffer fills and
      frames that do not fit count as ``engine_full``, as when the engine itself is slow;
    - records out of the engine (the link counts them as they leave the crossing);
    - runtime parameter switches into the engine (queued: one waits in the crossing while the
      engine holds another until its tuple; the link refuses a PARAMS packet only when the
      crossing is full). A switch that reaches the engine's side is written before any
      further tuple is taken, so it is in force from its tuple as without the crossing;
    - the values in force back to ``sync`` for STATUS (through synchronisers, taken when two
      samples agree: they change only at a switch; the agreement is registered, so a value
      reaches STATUS a cycle after the two samples that agree: a STATUS sent in that cycle
      tells the value before, as one sent a cycle earlier would);
    - a programmable engine's load bytes into it (not emptied by RESET), and back to ``sync``
      the count of those it took, with the image in force and ``refused`` (as the values in
      force are), so that the link answers a LOAD once its bytes are in the engine and the
      answer to a load's last chunk tells the load's outcome;
    - the resets: the ``sync`` reset and every accepted RESET hold the engine's domain in reset
      (asynchronously asserted, released in step with ``engine_clk``) and empty the crossings
      but the loads', until the engine's domain was seen in reset;
    - STATUS's ``idle``: the engine's domain tells, through a synchroniser, that nothing went
      into or came out of the engine for as many of its cycles as the link waits of its own.

    Members
    -------
    rx_clk, rxd, rx_dv, rx_er : ``In``
    txd, tx_en, tx_er : ``Out``
    engine_clk : ``In(1)``
        With ``engine_clock``: the engine's clock.
    activity, trouble : ``Out(1)``
        The link's pulses (:class:`UdpLink`), for the LEDs.
    sdram : ``Out(pins_signature(...))``
        With an engine of ``--store sdram``: its SDRAM chip's pins, in the engine's clock
        domain (the board top puts them on the board's pads, :mod:`nfacep.boards.sdram`).
    """

    def __init__(
        self,
        engine,
        *,
        mac: bytes,
        ip: bytes,
        port: int,
        capacity: int = CAPACITY,
        flush: int = 1024,
        engine_clock: bool = False,
        icmp: bool = True,
    ):
        from nfacep.hdl.layout import params_layout
        from nfacep.links.protocol import engine_fields, engine_id, engine_kind_fields

        self._engine = engine
        self._programmable = hasattr(engine, "shape")
        params = engine.params
        if self._programmable:
            import dataclasses

            from nfacep.image import Capacity
            from nfacep.links.protocol import shape_engine_id

            c = engine.shape.capacity
            params = dataclasses.replace(
                params, engine="programmable", states=c.states, atoms=c.atoms, queries=c.queries
            )
            assert Capacity.of(params) == c
            self._engine_id = shape_engine_id(engine.shape, params)
            layout = None
        else:
            self._engine_id = engine_id(engine.nfa, engine.params)
            layout = params_layout(engine.nfa.program.parameters)
        self._engine_clock = bool(engine_clock)
        self._quiet = 2 * (engine.params.partitions + 32)
        self._link_args = {
            "mac": mac,
            "ip": ip,
            "port": port,
            "engine_id": self._engine_id,
            "capacity": capacity,
            "flush": flush,
            "quiet": self._quiet,
            "params_bits": layout.size if layout is not None else 0,
            "engine_fields": {**engine_fields(params), **engine_kind_fields(params)},
            "load": self._programmable,
            "icmp": icmp,
        }
        members = {
            **GMII_MEMBERS,
            "activity": Out(1),
            "trouble": Out(1),
        }
        if self._engine_clock:
            members["engine_clk"] = In(1)
        if "sdram" in engine.signature.members:  # --store sdram: the chip's pins, passed out
            members["sdram"] = engine.signature.members["sdram"]
        super().__init__(members)

    @property
    def engine(self):
        """The engine behind the link."""
        return self._engine

    @property
    def engine_id(self) -> int:
        return self._engine_id

    @property
    def engine_clock(self) -> bool:
        """Whether the engine has a clock domain of its own (``engine_clk``)."""
        return self._engine_clock

    def elaborate(self, platform):
        from amaranth.hdl import ResetInserter

        m = Module()
        engine = self._engine
        m.submodules.link = link = UdpLink(
            engine.tuple_layout, engine.record_layout, **self._link_args
        )
        m.d.comb += [
            link.rx_clk.eq(self.rx_clk),
            link.rxd.eq(self.rxd),
            link.rx_dv.eq(self.rx_dv),
            link.rx_er.eq(self.rx_er),
            self.txd.eq(link.txd),
            self.tx_en.eq(link.tx_en),
            self.tx_er.eq(link.tx_er),
            self.activity.eq(link.activity),
            self.trouble.eq(link.trouble),
        ]
        if "sdram" in self.signature.members:  # (in the engine's clock domain)
            wiring.connect(m, engine.sdram, wiring.flipped(self.sdram))
        if self._engine_clock:
            self._crossings(m, link, engine)
            return m
        m.submodules.engine = ResetInserter(link.engine_reset)(engine)
        wiring.connect(m, link.o_stream, engine.i_stream)
        wiring.connect(m, engine.o_stream, link.i_stream)
        if self._programmable:
            taken = self._config_port(m, "sync", link.o_config, engine, link.engine_reset)
            m.d.comb += [
                link.image.eq(engine.image),
                link.refused.eq(engine.refused),
                link.image_from.eq(engine.image_from),
                link.config_taken.eq(taken),
            ]
        if self._link_args["params_bits"]:
            m.d.comb += [
                engine.i_params.valid.eq(link.o_params.valid),
                link.o_params.ready.eq(engine.i_params.ready),
                link.param_values.eq(engine.param_values),
            ]
            self._switch(m, link.o_params.payload, engine)
        return m

    def _switch(self, m, switch, engine):
        """The engine's switch from the link's: the tuple number and the values."""
        seq = engine.i_params.payload.seq
        width = self._link_args["params_bits"]
        m.d.comb += [
            seq.eq(switch[: min(len(seq), 8 * SWITCH_BYTES)]),
            engine.i_params.payload.values.eq(switch[8 * SWITCH_BYTES : 8 * SWITCH_BYTES + width]),
        ]

    def _crossings(self, m, link, engine):
        """The engine in the ``engine`` domain, every signal between it and the link crossed
        (the class's description)."""
        m.domains.engine = ClockDomain("engine", local=True)
        m.d.comb += ClockSignal("engine").eq(self.engine_clk)
        # the crossings' write side in the link's clock, emptied with the engine's reset
        m.domains.to_engine = ClockDomain("to_engine", local=True)
        flush, seen = Signal(), Signal()
        m.d.comb += [
            ClockSignal("to_engine").eq(ClockSignal("sync")),
            ResetSignal("to_engine").eq(ResetSignal("sync") | flush),
        ]
        with m.If(link.engine_reset):
            m.d.sync += flush.eq(1)
        with m.Elif(seen):
            m.d.sync += flush.eq(0)
        m.submodules.engine_reset = ResetSynchronizer(ResetSignal("sync") | flush, domain="engine")
        in_reset = Signal(reset_less=True)
        m.d.engine += in_reset.eq(ResetSignal("engine"))
        m.submodules.reset_seen = FFSynchronizer(in_reset, seen, o_domain="sync")
        m.submodules.engine = DomainRenamer("engine")(engine)

        m.submodules.tuples_in = tuples = AsyncFIFO(
            width=engine.tuple_layout.size, depth=16, w_domain="to_engine", r_domain="engine"
        )
        staged = self._tuple_stage(m, link, tuples, flush)
        # (read ahead: the link's readiness drives no read address, only registers' enables)
        m.submodules.records_out = records = ReadAheadAsyncFIFO(
            width=engine.record_layout.size, depth=17, w_domain="engine", r_domain="sync"
        )
        m.d.comb += [
            records.w_en.eq(engine.o_stream.valid),
            records.w_data.eq(engine.o_stream.payload),
            engine.o_stream.ready.eq(records.w_rdy),
            link.i_stream.valid.eq(records.r_rdy),
            link.i_stream.payload.eq(records.r_data),
            records.r_en.eq(link.i_stream.ready),
        ]
        writing = (
            self._params_crossing(m, link, engine, flush) if self._link_args["params_bits"] else 0
        )
        if self._programmable:
            self._load_crossing(m, link, engine, flush)
        # a switch is written before any further tuple is taken
        m.d.comb += [
            engine.i_stream.valid.eq(tuples.r_rdy & ~writing),
            engine.i_stream.payload.eq(tuples.r_data),
            tuples.r_en.eq(engine.i_stream.ready & ~writing),
        ]
        self._engine_idle(m, link, engine, tuples, records, staged)

    def _tuple_stage(self, m, link, tuples, flush):
        """The link's tuples into the crossing through a one-tuple register (part of the
        crossing: emptied with the engine's reset, and none taken during it): the link's FIFO
        is read on that register's state alone, and the crossing written from it, so that no
        one LUT drives both FIFOs' counters and memories across the chip (timing; a tuple
        every other cycle, ample for tuples of several bytes). Returns whether it holds one."""
        staged = Signal()
        tuple_ = Signal(len(tuples.w_data), reset_less=True)
        room = Signal()  # (registered: the fullness is a Gray-code compare; timing)
        m.d.sync += room.eq((tuples.w_level < 14) & ~flush)
        m.d.comb += [
            link.o_stream.ready.eq(~staged & ~flush),
            tuples.w_en.eq(staged & room),
            tuples.w_data.eq(tuple_),
        ]
        with m.If(~staged):
            m.d.to_engine += tuple_.eq(link.o_stream.payload)
        with m.If(tuples.w_en):
            m.d.to_engine += staged.eq(0)
        with m.If(link.o_stream.valid & link.o_stream.ready):
            m.d.to_engine += staged.eq(1)
        return staged

    def _engine_idle(self, m, link, engine, tuples, records, staged):
        """``link.engine_busy``: a tuple or record in a crossing, or the engine's domain not
        quiet for the link's ``quiet`` cycles of its own (told through a synchroniser)."""
        quiet = Signal(range(self._quiet + 1))
        idle, idle_sync = Signal(), Signal()
        with m.If(tuples.r_rdy | engine.o_stream.valid):
            m.d.engine += [quiet.eq(0), idle.eq(0)]
        with m.Elif(quiet != self._quiet):
            m.d.engine += [quiet.eq(quiet + 1), idle.eq(quiet + 1 == self._quiet)]
        m.submodules.idle_sync = FFSynchronizer(idle, idle_sync, o_domain="sync")
        m.d.comb += link.engine_busy.eq(~idle_sync | staged | (tuples.w_level != 0) | records.r_rdy)

    def _params_crossing(self, m, link, engine, flush):
        """Switches into the engine's domain, the values in force back; returns the engine-side
        signal that a switch is written in this cycle."""
        switch = link.o_params.payload
        m.submodules.params_in = params = AsyncFIFO(
            width=len(switch), depth=2, w_domain="to_engine", r_domain="engine"
        )
        payload = Signal(len(switch))
        m.d.comb += [
            params.w_en.eq(link.o_params.valid),
            params.w_data.eq(switch),
            link.o_params.ready.eq(params.w_rdy),
            engine.i_params.valid.eq(params.r_rdy),
            payload.eq(params.r_data),
            params.r_en.eq(engine.i_params.ready),
        ]
        self._switch(m, payload, engine)
        initial = engine.values.packed(engine.values.initial)
        values = self._agreed(m, "values", engine.param_values.as_value(), link, flush, initial)
        m.d.comb += link.param_values.eq(values)
        return params.r_rdy & engine.i_params.ready

    def _load_crossing(self, m, link, engine, flush):
        """A programmable engine's load bytes into its domain, in a crossing that RESET does
        not empty (written in ``sync``, whose reset is the board's; the engine's reset leaves
        the entries in it): a load being received at RESET is refused all the same, since
        the engine's check of it starts again. The image in force, the first tuple it judged,
        ``refused`` and the bytes the engine took (:meth:`_config_port`) back, together
        (:meth:`_agreed`), so that STATUS never pairs one image with another's tuple, and an
        answer that the count of bytes releases tells the outcome of the load they end; the
        image and the count survive RESET, the tuple and ``refused`` go back to 0. (With the
        engine's clock as fast as the link's, two samples may not agree while the engine takes
        a load's bytes, one a cycle: the four are then taken once it stops.)"""
        m.domains.engine_load = ClockDomain("engine_load", local=True)
        m.d.comb += ClockSignal("engine_load").eq(self.engine_clk)
        m.submodules.engine_load_reset = ResetSynchronizer(
            ResetSignal("sync"), domain="engine_load"
        )
        config = stream.Signature(link.o_config.payload.shape()).create()
        cross(
            m,
            "config_in",
            link.o_config,
            config,
            depth=LOAD_FIFO_DEPTH,
            w_domain="sync",
            r_domain="engine",
        )
        taken = self._config_port(m, "engine_load", config, engine, ResetSignal("engine"))
        kept = Cat(engine.image, taken)
        both = Cat(kept, engine.image_from, engine.refused)
        back = self._agreed(m, "image", both, link, flush, 0, survives=len(kept))
        fields = iter((engine.image, taken, engine.image_from, engine.refused))
        at = 0
        for port in (link.image, link.config_taken, link.image_from, link.refused):
            width = len(next(fields))
            m.d.comb += port.eq(back[at : at + width])
            at += width

    def _config_port(self, m, domain, source, engine, hold):
        """The load bytes of the stream ``source`` into the engine's ``i_config``, none while
        ``hold`` (the engine's reset, which would lose the outcome of a load that ends then)
        nor while a load's outcome is not out yet; returns the bytes the engine took
        (:attr:`UdpLink.config_taken`: modulo ``2**LOAD_COUNT_BITS``, in Gray code, a load's
        last byte counted once the engine's ``checking`` falls), a register of ``domain``, the
        engine's clock and the board's reset (RESET leaves it). It counts at most one a cycle,
        so that its Gray code changes a bit at a time, and a sample of it in another clock's
        domain is one of its values."""
        port = engine.i_config
        ending = Signal()  # a load's last byte taken, its outcome not out yet
        count = Signal(LOAD_COUNT_BITS)
        code = Signal(LOAD_COUNT_BITS)
        open_ = ~hold & ~ending
        m.d.comb += [
            port.valid.eq(source.valid & open_),
            port.payload.eq(source.payload),
            source.ready.eq(port.ready & open_),
        ]
        took = port.valid & port.ready
        out = ending & ~engine.checking
        step = (took & ~port.payload.last) | out
        with m.If(took & port.payload.last):
            m.d[domain] += ending.eq(1)
        with m.Elif(out):
            m.d[domain] += ending.eq(0)
        m.d[domain] += [count.eq(count + step), code.eq(gray(count + step, LOAD_COUNT_BITS))]
        return code

    def _agreed(self, m, name, value, link, flush, initial, survives=0):
        """``value`` of the engine's domain in ``sync``: through a synchroniser, taken when
        two samples agree (it changes seldom); back to ``initial`` at an accepted RESET but
        for its low ``survives`` bits, which keep their value.

        The two samples are compared in groups of :data:`AGREE_GROUP` bits, each group's
        equality a flip-flop (none while the crossing is emptied), and the groups' AND takes
        the older of the two samples a cycle later (timing: a compare of the whole width
        drove the enables of its flip-flops through a chain of LUTs). The pair compared and
        the value taken are those of before, a cycle later."""
        width = len(value)
        kept = survives
        sampled, last = Signal(width, init=initial), Signal(width, init=initial)
        agreed = Signal(width, init=initial, name=f"{name}_in_sync")
        m.submodules[f"{name}_sync"] = FFSynchronizer(value, sampled, o_domain="sync", init=initial)
        m.d.sync += last.eq(sampled)
        groups = range(0, width, AGREE_GROUP)
        equal = Signal(len(groups), name=f"{name}_equal")
        for i, at in enumerate(groups):
            part = slice(at, min(at + AGREE_GROUP, width))
            m.d.sync += equal[i].eq(~flush & (last[part] == sampled[part]))
        with m.If(Const(0) if kept == width else link.engine_reset):
            m.d.sync += agreed.eq(Cat(agreed[:kept], Const(initial, width)[kept:]))
        with m.Elif(~flush & equal.all()):  # (after a RESET: once the engine was reset)
            m.d.sync += agreed.eq(last)
        return agreed
