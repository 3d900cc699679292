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

With ``copies`` the ports first pass a register of their own beside each block (on ECP5
``TRELLIS_FF`` primitives, which Yosys does not merge; :func:`register_copy`): the read
address, loaded on edges with ``r_en`` high, so the row shows one enabled edge later, and the
write port, loaded on every edge, so a write lands an edge later. A large table's blocks are
spread over the device, and no single register can reach them all within a 150 MHz cycle;
the copies let the route be split in two.
"""

from __future__ import annotations

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = [
    "DP16KD_SHAPES",
    "RegisteredBank",
    "dp16kd_blocks",
    "dp16kd_tiling",
    "register_copy",
]

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


def register_copy(m: Module, platform, d: Value, en: Value, name: str) -> Value:
    """A register of its own loaded with ``d`` at every edge where ``en`` is high: a copy of a
    register elsewhere with the same ``d`` and ``en``, for one group of block RAMs, so that an
    address reaching blocks spread over the device has a driver near each group (its value
    after a reset is not to be relied on). Yosys merges equal flip-flops, so on ECP5 the copy
    is built from ``TRELLIS_FF`` primitives, which it leaves alone; elsewhere (simulation,
    ``nfacep verilog``) it is an ordinary register."""
    d = Value.cast(d)
    q = Signal(len(d), name=name, reset_less=True)
    if getattr(platform, "family", None) != "ecp5":
        with m.If(en):
            m.d.sync += q.eq(d)
        return q
    for i in range(len(d)):
        m.submodules[f"{name}_ff{i}"] = Instance(
            "TRELLIS_FF",
            p_GSR="DISABLED",
            p_CEMUX="CE",
            p_CLKMUX="CLK",
            p_LSRMUX="LSR",
            p_REGSET="RESET",
            p_SRMODE="LSR_OVER_CE",
            i_CLK=ClockSignal("sync"),
            i_CE=en,
            i_LSR=Const(0),
            i_DI=d[i],
            o_Q=q[i],
        )
    return q


class RegisteredBank(wiring.Component):
    """``depth`` rows of ``width`` bits, one write port and one read port with two registers
    (see the module's description; ``copies``: a register more on each port).

    Members
    -------
    r_addr, r_en : ``In``
        Read address, and the enable of both read registers.
    r_data : ``Out(width)``
        The row read, two enabled edges after its address.
    r_spare : ``Out``
        With ``spare = (lo, hi)`` (three stages only): bits ``lo`` to ``hi`` of ``r_data``
        from a third register of their own (:func:`register_copy`), so that one set of logic
        reads them from a register placed beside it, not from the one the rest of the row is
        read from (a member only with ``spare``).
    w_addr, w_data, w_en : ``In``
        Write port: the row is written at the edge where ``w_en`` is high.
    """

    def __init__(
        self,
        *,
        width: int,
        depth: int,
        stages: int = 2,
        copies: bool = False,
        spare: tuple[int, int] | None = None,
    ):
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"Width must be a positive integer, not {width!r}")
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"Depth must be a positive integer, not {depth!r}")
        if stages not in (2, 3):
            raise ValueError(f"Stages must be 2 or 3, not {stages!r}")
        if spare is not None and (stages != 3 or not 0 <= spare[0] < spare[1] <= width):
            raise ValueError(f"A spare copy needs three stages and bits of the row, not {spare!r}")
        self._width, self._depth, self._stages = width, depth, stages
        self._copies = bool(copies)
        self._spare = spare
        addr = range(depth)
        members = {
            "r_addr": In(addr),
            "r_en": In(1),
            "r_data": Out(width),
            "w_addr": In(addr),
            "w_data": In(width),
            "w_en": In(1),
        }
        if spare is not None:
            members["r_spare"] = Out(spare[1] - spare[0])
        super().__init__(members)

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

    @property
    def copies(self) -> bool:
        """Whether the ports pass a register of their own beside each block first (see the
        class's description): the row shows ``stages + 1`` enabled edges after its address,
        and a write lands an edge later."""
        return self._copies

    def _ports(self, m: Module, platform, name: str):
        """The ports as the block RAM sees them, ``(r_addr, w_addr, w_data, w_en)``: the
        members, or with ``copies`` a register of each (the read address loaded on edges with
        ``r_en`` high, the write port on every edge) named after ``name``."""
        ports = (self.r_addr, self.w_addr, self.w_data, self.w_en)
        if not self._copies:
            return ports
        r_addr = register_copy(m, platform, self.r_addr, self.r_en, f"{name}_r_addr")
        w_port = register_copy(
            m, platform, Cat(self.w_addr, self.w_data, self.w_en), Const(1), f"{name}_w_port"
        )
        a, d = len(self.w_addr), len(self.w_data)
        return r_addr, w_port[:a], w_port[a : a + d], w_port[a + d]

    def elaborate(self, platform):
        if getattr(platform, "family", None) == "ecp5":
            m = self._elaborate_dp16kd(platform)
        else:
            m = self._elaborate_portable()
        if self._stages == 3:
            with m.If(self.r_en):
                m.d.sync += self.r_data.eq(self._last)
            if self._spare is not None:
                lo, hi = self._spare
                spare = register_copy(m, platform, self._last[lo:hi], self.r_en, "spare")
                m.d.comb += self.r_spare.eq(spare)
        else:
            m.d.comb += self.r_data.eq(self._last)
        return m

    @property
    def spare(self) -> tuple[int, int] | None:
        """The bits of the row copied in a third register of their own (``r_spare``)."""
        return self._spare

    def _elaborate_portable(self):
        m = Module()
        m.submodules.mem = mem = Memory(shape=self._width, depth=self._depth, init=[])
        wp = mem.write_port()
        rp = mem.read_port(transparent_for=())
        r_addr, w_addr, w_data, w_en = self._ports(m, None, "port")
        m.d.comb += [
            wp.addr.eq(w_addr),
            wp.data.eq(w_data),
            wp.en.eq(w_en),
            rp.addr.eq(r_addr),
            rp.en.eq(self.r_en),
        ]
        self._last = Signal(self._width, name="read_data")
        with m.If(self.r_en):
            m.d.sync += self._last.eq(rp.data)
        return m

    def _block_ports(self, m, platform, ports, lo, width, name):
        """``(r_addr, w_addr, w_data, w_en)`` as the block holding bits ``lo`` to ``lo +
        width`` of a row sees them: ``ports`` (the addresses zero-extended, the data padded),
        or with ``copies`` its own copy of what it uses."""
        r_addr, w_addr, w_data = ports
        if not self._copies:
            return r_addr, w_addr, w_data, self.w_en
        b_r_addr = register_copy(m, platform, r_addr, self.r_en, f"{name}_r_addr")
        part = w_data[lo : lo + width]
        port = register_copy(m, platform, Cat(w_addr, part, self.w_en), Const(1), f"{name}_w_port")
        return b_r_addr, port[: len(w_addr)], Cat(Const(0, lo), port[len(w_addr) : -1]), port[-1]

    def _elaborate_dp16kd(self, platform):
        m = Module()
        block_depth, block_width, stacked, side = dp16kd_tiling(self._depth, self._width)
        low = (block_depth - 1).bit_length()  # address bits inside a block
        shift = 14 - low  # DP16KD addresses count in units of 1/2**shift of a word
        high_bits = max(0, (self._depth - 1).bit_length() - low)
        # the addresses zero-extended to the block's address bits
        r_addr, w_addr = Signal(low + high_bits), Signal(low + high_bits)
        m.d.comb += [r_addr.eq(self.r_addr), w_addr.eq(self.w_addr)]
        r_high = r_addr[low:] if high_bits else Const(0, 1)
        # which stacked block's output to take: the read's high address bits, delayed with
        # the data (address register, then output register; with copies the copy first)
        sel = [Signal(max(1, high_bits), name=f"stack_sel{i}") for i in range(2 + self._copies)]
        with m.If(self.r_en):
            m.d.sync += [sel[0].eq(r_high), *(a.eq(b) for a, b in zip(sel[1:], sel, strict=False))]
        padded = side * block_width
        w_data = Signal(padded)
        m.d.comb += w_data.eq(self.w_data)
        outputs = []
        for s in range(stacked):
            out = Signal(padded, name=f"stack{s}_data")
            outputs.append(out)
            for c in range(side):
                lo = c * block_width
                b_r_addr, b_w_addr, b_w_data, b_w_en = self._block_ports(
                    m, platform, (r_addr, w_addr, w_data), lo, block_width, f"dp{s}_{c}"
                )
                w_high = b_w_addr[low:] if high_bits else Const(0, 1)
                ports = {
                    "i_CLKA": ClockSignal("sync"),
                    "i_CLKB": ClockSignal("sync"),
                    "i_CEA": Const(1),
                    "i_OCEA": Const(1),
                    "i_RSTA": Const(0),
                    "i_WEA": b_w_en & (w_high == s),
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
                        a, b = b_w_addr[i - shift], b_r_addr[i - shift]
                    ports[f"i_ADA{i}"], ports[f"i_ADB{i}"] = a, b
                for i in range(18):
                    ports[f"i_DIA{i}"] = b_w_data[lo + i] if i < block_width else Const(0)
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
            data = Mux(sel[-1] == s, outputs[s], data)
        self._last = Signal(self._width, name="read_data")
        m.d.comb += self._last.eq(data[: self._width])
        return m
