"""A block-RAM bank whose read data is registered twice: once at the address, once at the output.

The table partitioner (``hdl/table.py``) reads a row in one cycle and uses it two cycles after
the address was presented: the first register is the block RAM's own (address and read latch),
the second holds the data before any logic sees it. On most devices that second register is
an ordinary flip-flop after the block RAM (``amaranth.lib.memory`` and a register), which is
what simulation and ``nfacep verilog`` get. On ECP5 the block RAM's clock-to-output without
its output register (about 6 ns, speed grade 6) leaves little of a 150 MHz cycle for routing,
and Yosys maps ``amaranth.lib.memory`` to DP16KD with the output register off; so for an ECP5
platform this bank instantiates DP16KD primitives itself with ``REGMODE_B = "OUTREG"``, tiled
side by side (width) and stacked (depth) in the block shape that takes the fewest blocks.

Both give the same cycle behaviour: ``r_data`` shows the row at ``r_addr`` two (or, with
``stages=3``, three) rising edges with ``r_en`` high after the address was presented at the
first of them, and holds while ``r_en`` is low. A write (``w_en``) at the edge of the read
gives either value (the table's forwarding never uses it). Nothing is reset: the table
clears its banks itself.
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Const, Instance, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["DP16KD_SHAPES", "RegisteredBank", "dp16kd_blocks", "dp16kd_tiling"]

#: (depth, width) of one DP16KD in the shapes a bank uses (true dual port: widths up to 18).
DP16KD_SHAPES = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18))


def dp16kd_tiling(depth: int, width: int) -> tuple[int, int, int, int]:
    """(block depth, block width, blocks stacked, blocks side by side) for a bank of ``depth``
    rows of ``width`` bits. Stacked blocks need a multiplexer after the output registers, on
    the table's critical path, so the deepest shape that needs no stacking is taken when it
    costs at most an eighth more blocks than the fewest; otherwise the fewest blocks, and of
    equal counts the fewest stacked."""
    tilings = [(d, w, -(-depth // d), -(-width // w)) for d, w in DP16KD_SHAPES]
    fewest = min(tilings, key=lambda t: (t[2] * t[3], t[2]))
    flat = [t for t in tilings if t[2] == 1]
    if flat:
        best_flat = min(flat, key=lambda t: t[2] * t[3])
        if 8 * best_flat[2] * best_flat[3] <= 9 * fewest[2] * fewest[3]:
            return best_flat
    return fewest


def dp16kd_blocks(depth: int, width: int) -> int:
    """DP16KD blocks of a :class:`RegisteredBank` of ``depth`` rows of ``width`` bits on ECP5."""
    _, _, stacked, side = dp16kd_tiling(depth, width)
    return stacked * side


class RegisteredBank(wiring.Component):
    """``depth`` rows of ``width`` bits, one write port and one read port with two registers
    (see the module's description).

    Members
    -------
    r_addr, r_en : ``In``
        Read address, and the enable of both read registers.
    r_data : ``Out(width)``
        The row read, two enabled edges after its address.
    w_addr, w_data, w_en : ``In``
        Write port: the row is written at the edge where ``w_en`` is high.
    """

    def __init__(self, *, width: int, depth: int, stages: int = 2):
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"Width must be a positive integer, not {width!r}")
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"Depth must be a positive integer, not {depth!r}")
        if stages not in (2, 3):
            raise ValueError(f"Stages must be 2 or 3, not {stages!r}")
        self._width, self._depth, self._stages = width, depth, stages
        addr = range(depth)
        super().__init__(
            {
                "r_addr": In(addr),
                "r_en": In(1),
                "r_data": Out(width),
                "w_addr": In(addr),
                "w_data": In(width),
                "w_en": In(1),
            }
        )

    @property
    def width(self) -> int:
        return self._width

    @property
    def depth(self) -> int:
        return self._depth

    @property
    def stages(self) -> int:
        """Registers on the read path: the row shows this many enabled edges after its address
        (a third is a flip-flop after the output register, for banks spread far over a
        device)."""
        return self._stages

    def elaborate(self, platform):
        if getattr(platform, "family", None) == "ecp5":
            m = self._elaborate_dp16kd()
        else:
            m = self._elaborate_portable()
        if self._stages == 3:
            with m.If(self.r_en):
                m.d.sync += self.r_data.eq(self._last)
        else:
            m.d.comb += self.r_data.eq(self._last)
        return m

    def _elaborate_portable(self):
        m = Module()
        m.submodules.mem = mem = Memory(shape=self._width, depth=self._depth, init=[])
        wp = mem.write_port()
        rp = mem.read_port(transparent_for=())
        m.d.comb += [
            wp.addr.eq(self.w_addr),
            wp.data.eq(self.w_data),
            wp.en.eq(self.w_en),
            rp.addr.eq(self.r_addr),
            rp.en.eq(self.r_en),
        ]
        self._last = Signal(self._width, name="read_data")
        with m.If(self.r_en):
            m.d.sync += self._last.eq(rp.data)
        return m

    def _elaborate_dp16kd(self):
        m = Module()
        block_depth, block_width, stacked, side = dp16kd_tiling(self._depth, self._width)
        low = (block_depth - 1).bit_length()  # address bits inside a block
        shift = 14 - low  # DP16KD addresses count in units of 1/2**shift of a word
        high_bits = max(0, (self._depth - 1).bit_length() - low)
        # the addresses zero-extended to the block's address bits
        r_addr, w_addr = Signal(low + high_bits), Signal(low + high_bits)
        m.d.comb += [r_addr.eq(self.r_addr), w_addr.eq(self.w_addr)]
        r_high = r_addr[low:] if high_bits else Const(0, 1)
        w_high = w_addr[low:] if high_bits else Const(0, 1)
        # which stacked block's output to take: the read's high address bits, delayed with
        # the data (address register, then output register)
        sel = [Signal(max(1, high_bits), name=f"stack_sel{i}") for i in range(2)]
        with m.If(self.r_en):
            m.d.sync += [sel[0].eq(r_high), sel[1].eq(sel[0])]
        padded = side * block_width
        w_data = Signal(padded)
        m.d.comb += w_data.eq(self.w_data)
        outputs = []
        for s in range(stacked):
            out = Signal(padded, name=f"stack{s}_data")
            outputs.append(out)
            for c in range(side):
                lo = c * block_width
                ports = {
                    "i_CLKA": ClockSignal("sync"),
                    "i_CLKB": ClockSignal("sync"),
                    "i_CEA": Const(1),
                    "i_OCEA": Const(1),
                    "i_RSTA": Const(0),
                    "i_WEA": self.w_en & (w_high == s),
                    "i_CEB": self.r_en,
                    "i_OCEB": self.r_en,
                    "i_RSTB": Const(0),
                    "i_WEB": Const(0),
                }
                for i in range(3):
                    ports[f"i_CSA{i}"] = Const(0)
                    ports[f"i_CSB{i}"] = Const(0)
                for i in range(14):
                    # x18: the two lowest address pins are the write's byte enables
                    if i < shift:
                        a = b = Const(1 if block_width == 18 and i < 2 else 0)
                    else:
                        a, b = w_addr[i - shift], r_addr[i - shift]
                    ports[f"i_ADA{i}"], ports[f"i_ADB{i}"] = a, b
                for i in range(18):
                    ports[f"i_DIA{i}"] = w_data[lo + i] if i < block_width else Const(0)
                    ports[f"i_DIB{i}"] = Const(0)
                    if i < block_width:
                        ports[f"o_DOB{i}"] = out[lo + i]
                m.submodules[f"dp16kd_{s}_{c}"] = Instance(
                    "DP16KD",
                    p_DATA_WIDTH_A=block_width,
                    p_DATA_WIDTH_B=block_width,
                    p_REGMODE_A="NOREG",
                    p_REGMODE_B="OUTREG",
                    p_RESETMODE="SYNC",
                    p_ASYNC_RESET_RELEASE="SYNC",
                    p_CSDECODE_A="0b000",
                    p_CSDECODE_B="0b000",
                    p_WRITEMODE_A="NORMAL",
                    p_WRITEMODE_B="NORMAL",
                    p_GSR="DISABLED",
                    **ports,
                )
        data = outputs[0]
        for s in range(1, stacked):
            data = Mux(sel[1] == s, outputs[s], data)
        self._last = Signal(self._width, name="read_data")
        m.d.comb += self._last.eq(data[: self._width])
        return m
