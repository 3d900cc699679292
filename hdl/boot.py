"""The programmable engine as a board holds it: one that boots with a query file's image
(:class:`BootedEngine`, the engine of ``nfacep build --engine programmable``'s board tops)."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from nfacep.image import EngineShape, image, load, port_words
from nfacep.nfa import Nfa
from nfacep.params import EngineParams
from nfacep.settings import ParamValues

from .programmable import ProgrammableEngine
from .sdram.timing import SDRAMSetup

__all__ = ["BootedEngine"]


class BootedEngine(wiring.Component):
    """A :class:`ProgrammableEngine` of ``shape`` and ``params`` that puts ``nfa``'s image
    (with the runtime parameters' ``values``) in force after every reset: the engine of
    ``nfacep build --engine programmable``'s board tops. Raises
    :class:`~nfacep.image.ImageError` when ``nfa`` does not fit.

    The load of ``nfa``'s image (:func:`nfacep.image.load`, in force from tuple 0) is a ROM
    the component streams into the engine's configuration port, a byte a cycle, from the
    reset on; tuples wait for it as for any load. So the board matches the file's queries as
    soon as it is up, and a reset (a link's RESET) puts them back in force. The configuration
    registers are written from the ROM, not wired to constants, so synthesis keeps the whole
    programmable engine: its area is the engine's for any query that fits.

    Members
    -------
    i_stream, o_stream, tuples, matched, drops
        The engine's (:class:`ProgrammableEngine`).
    configured, refused, image
        The engine's: whether a load is in force, loads refused, the image in force.
    sdram
        With ``--store sdram`` (``sdram``: the board's chip): the engine's SDRAM pins.
    """

    def __init__(
        self,
        shape: EngineShape,
        params: EngineParams,
        nfa: Nfa,
        values: ParamValues | None = None,
        *,
        sdram: SDRAMSetup | None = None,
    ):
        self._image = image(nfa, shape, values)  # ImageError when it does not fit
        self._engine = engine = ProgrammableEngine(shape, params, sdram=sdram)
        self._nfa = nfa
        self._values = values
        self._words = port_words(load(self._image))
        counter_width = len(engine.refused)
        super().__init__(
            {
                "i_stream": In(stream.Signature(engine.tuple_layout)),
                "o_stream": Out(stream.Signature(engine.record_layout)),
                "configured": Out(1),
                "refused": Out(counter_width),
                "image": Out(64),
                "tuples": Out(len(engine.tuples)),
                "matched": Out(len(engine.matched)),
                "drops": Out(len(engine.drops)),
                **{k: v for k, v in engine.signature.members.items() if k == "sdram"},
            }
        )

    @property
    def engine(self) -> ProgrammableEngine:
        return self._engine

    @property
    def nfa(self) -> Nfa:
        """The query file whose image the engine boots with."""
        return self._nfa

    @property
    def params(self) -> EngineParams:
        return self._engine.params

    @property
    def values(self) -> ParamValues | None:
        """The runtime parameters' values in the boot image."""
        return self._values

    @property
    def boot_image(self):
        """The boot image (:class:`nfacep.image.Image`)."""
        return self._image

    def use_sdram(self, setup: SDRAMSetup, read_delay: int) -> None:
        """The engine's (:meth:`ProgrammableEngine.use_sdram`)."""
        self._engine.use_sdram(setup, read_delay)

    @property
    def sdram_setup(self) -> tuple[SDRAMSetup, int]:
        """The engine's (:attr:`ProgrammableEngine.sdram_setup`)."""
        return self._engine.sdram_setup

    @property
    def shape(self) -> EngineShape:
        return self._engine.shape

    @property
    def store(self):
        return self._engine.store

    @property
    def tuple_layout(self) -> data.StructLayout:
        return self._engine.tuple_layout

    @property
    def record_layout(self) -> data.StructLayout:
        return self._engine.record_layout

    def elaborate(self, platform):
        m = Module()
        m.submodules.engine = engine = self._engine
        words = self._words
        m.submodules.boot_rom = rom = memory.Memory(shape=9, depth=len(words), init=words)
        read = rom.read_port(domain="comb")
        sent = Signal(range(len(words) + 1), name="boot_sent")
        port = engine.i_config
        m.d.comb += [
            read.addr.eq(sent),
            port.valid.eq(sent < len(words)),
            port.payload.data.eq(read.data[:8]),
            port.payload.last.eq(read.data[8]),
        ]
        with m.If(port.valid & port.ready):
            m.d.sync += sent.eq(sent + 1)
        wiring.connect(m, wiring.flipped(self.i_stream), engine.i_stream)
        wiring.connect(m, engine.o_stream, wiring.flipped(self.o_stream))
        for name in ("configured", "refused", "image", "tuples", "matched", "drops"):
            m.d.comb += getattr(self, name).eq(getattr(engine, name))
        if "sdram" in self.signature.members:  # --store sdram: the chip's pins, passed out
            wiring.connect(m, engine.sdram, wiring.flipped(self.sdram))
        return m
