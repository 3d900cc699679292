"""The SDRAM's pins on the board (``--store sdram``): the engine's SDRAM controller
(:class:`~nfacep.hdl.sdram.controller.SDRAMController`, its pins
:func:`~nfacep.hdl.sdram.controller.pins_signature`) on amaranth-boards' ``SDRAMResource``
(the Colorlight 5A-75B: 11 address pins, one bank pin, 32 DQ, a clock; no CKE, CS# or DQM).

What :class:`SdramPads` does, in the clock domain of the controller (the engine's):

- **The SDRAM's clock** leaves through an ``ODDRX1F`` (:class:`amaranth.lib.io.DDRBuffer`)
  driven with the pattern (0, 1): the engine's clock inverted, so the chip samples at the
  middle of the FPGA's cycle what the FPGA launched at its start (half a period of setup and
  of hold for every command, address and write-data pin). This is what LiteX's Colorlight
  targets do (a DDR output of a 180° clock).
- **Command, address, bank and write data** leave through the I/O cells' output flip-flops
  (``OFS1P3DX``, :class:`amaranth.lib.io.FFBuffer`), DQ with its output enable registered
  beside it (the DQ pins are tristated unless a WRITE drives them): one clock from the
  controller's pins to the chip's.
- **Read data** is captured by the I/O cells' input flip-flops (``IFS1P3DX``) at a rising
  edge of the engine's clock: one clock more. With the chip's clock inverted the chip sees a
  command half a cycle after it leaves and drives the word ``CL`` of its clocks later, valid
  (after its access time and the way back) until just after its next clock; the edge that
  falls in that window is the second after the chip's CAS latency (:func:`read_window`). So
  a read takes :data:`READ_DELAY` clocks more than on the controller's own pins: the
  controller is built with that ``read_delay`` (:meth:`nfacep.hdl.engine.Engine.use_sdram`).
  At a slow clock (the ULX3S's UART top runs at the board's 25 MHz) that edge comes after the
  word is gone and the first edge after the CAS latency falls in the window: a read takes one
  clock more (:func:`choose_window` picks the edge, :func:`use_board_sdram` builds the
  controller for it).

Without a port (``pins=None``: the simulation of the board top, ``nfacep sim --link udp
--store sdram``) the same registers are flip-flops in the fabric and the chip's pins are the
component's ``chip`` member, where :mod:`nfacep.sim.sdram` connects the chip's model clocked
by the engine's clock: with no delays, the model samples a command at the edge after the
output registers took it and its read data is taken by the input registers at the edge after
it drove it, so the read comes :data:`READ_DELAY` clocks later there too: the simulation's
cycles are the board's. With the earlier capture (``read_delay`` 1) the simulation clocks the
chip's model by the engine's clock inverted, as the board clocks the chip: it takes a command
half a clock after the output registers, and its word is taken at the first edge after.

The delays (:class:`PadTiming`) are estimates, not measured on a board: the chip's access
time and output hold are figures typical of SDR SDRAM data sheets at CAS latency 2 (the
ULX3S's AS4C32M16SB-7's: tAC 6 ns, tOH 2.5 ns), the ECP5's
I/O and the board's traces a few nanoseconds. :func:`read_window` says, at an engine clock,
how far the capture edge lies inside the window; ``nfacep build`` refuses a clock where it
does not (between about 43 and 71 MHz with these figures neither edge lies in the window).

:func:`use_board_sdram` (the controller built for a board top's engine clock and its pads) and
:func:`attach` (the pads on the board's pins) are what every board top that drives the chip
(``--link udp``, ``--link uart``) calls; :func:`report` is what its build report says.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Module
from amaranth.lib import io, wiring
from amaranth.lib.wiring import In, Out

from nfacep.errors import UsageError
from nfacep.hdl.sdram.controller import pins_signature
from nfacep.hdl.sdram.timing import SDRAMGeometry

__all__ = [
    "READ_DELAY",
    "PadTiming",
    "ReadWindow",
    "SdramPads",
    "attach",
    "check_board",
    "check_window",
    "choose_window",
    "read_window",
    "report",
    "use_board_sdram",
]

#: Clocks the pads add to a read: the command's output register and the word's input one.
READ_DELAY = 2


@dataclass(frozen=True)
class PadTiming:
    """Delays around the chip (ns; estimates, see the module's docstring): ``clock_ns`` from
    the engine's clock edge to the chip's clock pin (ODDRX1F, pad, trace), ``data_in_ns`` from
    the chip's DQ pin to the input flip-flop (trace, pad), the chip's access time ``t_ac_ns``
    (its clock to data valid) and output hold ``t_oh_ns`` (data held after its next clock),
    and the input flip-flop's ``setup_ns`` and ``hold_ns``."""

    clock_ns: float = 3.5
    data_in_ns: float = 1.5
    t_ac_ns: float = 6.0
    t_oh_ns: float = 2.5
    setup_ns: float = 0.5
    hold_ns: float = 0.5


@dataclass(frozen=True)
class ReadWindow:
    """Where the input flip-flop's edge lies in the read data's valid window at ``mhz``:
    ``setup_ns`` after the window opens, ``hold_ns`` before it closes, both after the
    flip-flop's own setup and hold (negative: missed)."""

    mhz: float
    setup_ns: float
    hold_ns: float
    read_delay: int = READ_DELAY

    @property
    def met(self) -> bool:
        return self.setup_ns >= 0 and self.hold_ns >= 0

    def as_dict(self) -> dict:
        return {
            "read_delay": self.read_delay,
            "capture_setup_ns": round(self.setup_ns, 2),
            "capture_hold_ns": round(self.hold_ns, 2),
            "capture_met": self.met,
        }


def read_window(
    mhz: float,
    cas_latency: int,
    t: PadTiming = PadTiming(),
    read_delay: int = READ_DELAY,
) -> ReadWindow:
    """The read capture at ``mhz`` (the engine's and SDRAM's clock) for a chip at
    ``cas_latency``, counted from the edge at which the output flip-flops take a READ (0): the
    chip (its clock inverted) takes it half a period plus ``clock_ns`` later, and its word is
    valid at the input flip-flop from ``CL`` of its clocks plus the access time later until
    its next clock plus the output hold; the flip-flop takes it at edge ``CL + read_delay``:
    with 2, the edge at which it takes it in the simulation (the chip's model there takes the
    READ at edge 1 and drives the word after edge ``CL + 1``); with 1, the one before (the
    simulation then clocks the model inverted: READ at edge 0.5, the word after ``CL +
    0.5``)."""
    period = 1e3 / mhz
    chip_edge = period / 2 + t.clock_ns + cas_latency * period
    opens = chip_edge + t.t_ac_ns + t.data_in_ns
    closes = chip_edge + period + t.t_oh_ns + t.data_in_ns
    edge = (cas_latency + read_delay) * period
    return ReadWindow(mhz, edge - opens - t.setup_ns, closes - edge - t.hold_ns, read_delay)


def choose_window(mhz: float, cas_latency: int) -> ReadWindow:
    """The capture edge at ``mhz``: ``CL + 2`` (:data:`READ_DELAY`) if it lies in the read
    data's window, else ``CL + 1`` if that does; else the former (not met)."""
    late = read_window(mhz, cas_latency)
    early = read_window(mhz, cas_latency, read_delay=1)
    return late if late.met or not early.met else early


def check_board(platform) -> None:
    """A :class:`UsageError` unless ``platform`` has an SDRAM (``SDRAMResource`` 0)."""
    if ("sdram", 0) not in platform.resources:
        raise UsageError(
            f"--store sdram: {type(platform).__name__} has no SDRAM (amaranth-boards' "
            "SDRAMResource); use --store table"
        )


def check_window(mhz: float, cas_latency: int) -> ReadWindow:
    """The read window at ``mhz`` (:func:`choose_window`); a :class:`UsageError` when neither
    capture edge lies in it."""
    window = choose_window(mhz, cas_latency)
    if not window.met:
        raise UsageError(
            f"--store sdram with the engine at {mhz:.2f} MHz: the SDRAM's read data would be "
            f"captured outside its valid window ({window.setup_ns:.1f} ns after it opens, "
            f"{window.hold_ns:.1f} ns before it closes; boards/sdram.py): choose another "
            "--engine-mhz"
        )
    return window


def use_board_sdram(engine, mhz: float) -> ReadWindow:
    """With ``--store sdram``: build ``engine``'s controller for its chip at ``mhz`` (the
    board top's engine clock) and the pads' read delay there
    (:meth:`~nfacep.hdl.engine.Engine.use_sdram`); the read window, a UsageError when the pads
    cannot capture the chip's read data at that clock (:func:`check_window`)."""
    from dataclasses import replace

    setup = replace(engine.sdram_setup[0], clk_freq=mhz * 1e6)
    window = check_window(mhz, setup.timing.cas_latency)
    engine.use_sdram(setup, window.read_delay)
    return window


def attach(m: Module, platform, sdram, engine, clock) -> None:
    """Put the engine's SDRAM pins ``sdram`` (a board top's ``sdram`` member: the engine's,
    passed out) on the board's ``SDRAMResource`` 0 through :class:`SdramPads`, in a clock
    domain of the engine's clock ``clock``."""
    from amaranth.hdl import ClockDomain, ClockSignal

    m.domains.sdram = ClockDomain("sdram", local=True, reset_less=True)
    m.d.comb += ClockSignal("sdram").eq(clock)
    pins = platform.request("sdram", 0, dir="-")
    geometry = engine.sdram_setup[0].geometry
    m.submodules.sdram_pads = pads = SdramPads(geometry, pins, domain="sdram")
    wiring.connect(m, sdram, pads.ctrl)


def report(engine, mhz: float) -> tuple[dict, str]:
    """The build report's ``sdram`` fields for ``engine``'s chip at ``mhz`` and what its note
    says of them."""
    setup = engine.sdram_setup[0]
    window = choose_window(mhz, setup.timing.cas_latency)
    g = setup.geometry
    fields = {
        "mhz": round(mhz, 3),
        "chip": setup.timing.name,
        "geometry": f"{g.banks} banks x {g.rows} rows x {g.columns} columns x {g.width} bits",
        **window.as_dict(),
    }
    note = (
        f"partitions in the board's SDRAM ({setup.timing.name}), clocked with the engine "
        f"(read capture {window.setup_ns:.1f} / {window.hold_ns:.1f} ns of setup / hold at "
        f"edge CL + {window.read_delay}, estimated: boards/sdram.py)"
    )
    return fields, note


class SdramPads(wiring.Component):
    """The controller's SDRAM pins (``ctrl``, facing the controller) through registers to the
    chip, in ``domain``: on the board's ``SDRAMResource`` ``pins`` (requested with
    ``dir="-"``) through the I/O cells, or, with ``pins=None``, in the fabric with the chip's
    side as the ``chip`` member (simulation). See the module's docstring.

    Members
    -------
    ctrl : ``In(pins_signature(geometry))``
    chip : ``Out(pins_signature(geometry))``
        Only without ``pins``.
    """

    def __init__(self, geometry: SDRAMGeometry, pins=None, *, domain: str = "sync"):
        self._pins, self._domain = pins, domain
        members = {"ctrl": In(pins_signature(geometry))}
        if pins is None:
            members["chip"] = Out(pins_signature(geometry))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        ctrl = self.ctrl
        outputs = ("ras", "cas", "we", "ba", "a")
        if self._pins is None:
            for name in (*outputs, "cs", "dq_o", "dq_oe"):
                m.d[self._domain] += getattr(self.chip, name).eq(getattr(ctrl, name))
            m.d[self._domain] += ctrl.dq_i.eq(self.chip.dq_i)
            return m
        pins, d = self._pins, self._domain
        m.submodules.clk = clk = io.DDRBuffer("o", pins.clk, o_domain=d)
        m.d.comb += [clk.o[0].eq(0), clk.o[1].eq(1)]  # the engine's clock inverted
        for name in outputs:
            m.submodules[name] = buf = io.FFBuffer("o", getattr(pins, name), o_domain=d)
            m.d.comb += buf.o.eq(getattr(ctrl, name))
        for name, value in (("cs", ctrl.cs), ("clk_en", 1)):
            if hasattr(pins, name):
                m.submodules[name] = buf = io.FFBuffer("o", getattr(pins, name), o_domain=d)
                m.d.comb += buf.o.eq(value)
        m.submodules.dq = dq = io.FFBuffer("io", pins.dq, i_domain=d, o_domain=d)
        m.d.comb += [dq.o.eq(ctrl.dq_o), dq.oe.eq(ctrl.dq_oe), ctrl.dq_i.eq(dq.i)]
        return m
