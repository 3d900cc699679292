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
the copies let the route be split in two. With ``groups`` the blocks side by side are split in
that many runs (:func:`dp16kd_groups`; the portable form keeps each run's bits in a memory of
its own), each with read and write addresses of its own (``r_addr`` and ``w_addr`` are then
arrays, one address per group), so that no one register drives the address copies beside
every block of the bank.
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
    "dp16kd_groups",
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


def dp16kd_groups(depth: int, width: int, groups: int) -> list[tuple[int, int]]:
    """The bits ``(lo, hi)`` of each of ``groups`` groups of a :class:`RegisteredBank` of
    ``depth`` rows of ``width`` bits: its blocks side by side (:func:`dp16kd_tiling`) split in
    order into runs of nearly equal count, each run's blocks stacked with it; at most one group
    per block side by side."""
    _, block_width, _, side = dp16kd_tiling(depth, width)
    if not 1 <= groups <= side:
        raise ValueError(
            f"Groups must be from 1 to {side} (the blocks side by side of a bank of {depth} "
            f"rows of {width} bits), not {groups!r}"
        )
    columns = [c * groups // side for c in range(side)]
    return [
        (columns.index(g) * block_width, min(width, (side - columns[::-1].index(g)) * block_width))
        for g in range(groups)
    ]


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
        Read address (with ``groups``, an array of one per group), and the enable of both
        read registers.
    r_data : ``Out(width)``
        The row read, two enabled edges after its address.
    r_spare : ``Out``
        With ``spare = (lo, hi)`` (three stages only): bits ``lo`` to ``hi`` of ``r_data``
        from a third register of their own (:func:`register_copy`), so that one set of logic
        reads them from a register placed beside it, not from the one the rest of the row is
        read from (a member only with ``spare``).
    w_addr, w_data, w_en : ``In``
        Write port: the row is written at the edge where ``w_en`` is high (``w_addr`` with
        ``groups``, an array of one per group).
    """

    def __init__(
        self,
        *,
        width: int,
        depth: int,
        stages: int = 2,
        copies: bool = False,
        groups: int = 1,
        spare: tuple[int, int] | None = None,
    ):
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"Width must be a positive integer, not {width!r}")
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"Depth must be a positive integer, not {depth!r}")
        if stages not in (2, 3):
            raise ValueError(f"Stages must be 2 or 3, not {stages!r}")
        if not isinstance(groups, int):
            raise ValueError(f"Groups must be an integer, not {groups!r}")
        if spare is not None and (stages != 3 or not 0 <= spare[0] < spare[1] <= width):
            raise ValueError(f"A spare copy needs three stages and bits of the row, not {spare!r}")
        self._bits = dp16kd_groups(depth, width, groups)
        self._width, self._depth, self._stages = width, depth, stages
        self._copies = bool(copies)
        self._groups = groups
        self._spare = spare
        addr = In(range(depth)) if groups == 1 else In(range(depth)).array(groups)
        members = {
            "r_addr": addr,
            "r_en": In(1),
            "r_data": Out(width),
            "w_addr": addr,
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

    @property
    def groups(self) -> int:
        """Groups of the bank's blocks with addresses of their own (:func:`dp16kd_groups`)."""
        return self._groups

    def _group_of(self, bit: int) -> int:
        """The group holding bit ``bit`` of a row."""
        return next(g for g, (lo, hi) in enumerate(self._bits) if lo <= bit < hi)

    def _addresses(self) -> tuple[list[Value], list[Value]]:
        """(read addresses, write addresses), one per group."""
        if self._groups == 1:
            return [self.r_addr], [self.w_addr]
        return list(self.r_addr), list(self.w_addr)

    def _ports(self, m: Module, platform, name: str, r_addr, w_addr, w_data):
        """The ports as the block RAM (of one group, ``w_data`` its bits) sees them, ``(r_addr,
        w_addr, w_data, w_en)``: the members, or with ``copies`` a register of each (the read
        address loaded on edges with ``r_en`` high, the write port on every edge) named after
        ``name``."""
        if not self._copies:
            return r_addr, w_addr, w_data, self.w_en
        r_copy = register_copy(m, platform, r_addr, self.r_en, f"{name}_r_addr")
        w_port = register_copy(
            m, platform, Cat(w_addr, w_data, self.w_en), Const(1), f"{name}_w_port"
        )
        a, d = len(w_addr), len(w_data)
        return r_copy, w_port[:a], w_port[a : a + d], w_port[a + d]

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
        self._last = Signal(self._width, name="read_data")
        if self._groups == 1:
            self._portable_memory(m, "", self.r_addr, self.w_addr, 0, self._width)
            return m
        # a memory of its own per group, at the group's addresses
        r_addrs, w_addrs = self._addresses()
        for g, (lo, hi) in enumerate(self._bits):
            self._portable_memory(m, str(g), r_addrs[g], w_addrs[g], lo, hi)
        return m

    def _portable_memory(self, m, suffix, r_addr, w_addr, lo, hi):
        """Bits ``lo`` to ``hi`` of the row in an ``amaranth.lib.memory`` (``mem`` and the port
        copies ``port``, ``suffix`` after each name), read into ``_last``."""
        mem = Memory(shape=hi - lo, depth=self._depth, init=[])
        m.submodules[f"mem{suffix}"] = mem
        wp = mem.write_port()
        rp = mem.read_port(transparent_for=())
        w_data = self.w_data if hi - lo == self._width else self.w_data[lo:hi]
        r_addr, w_addr, w_data, w_en = self._ports(m, None, f"port{suffix}", r_addr, w_addr, w_data)
        m.d.comb += [
            wp.addr.eq(w_addr),
            wp.data.eq(w_data),
            wp.en.eq(w_en),
            rp.addr.eq(r_addr),
            rp.en.eq(self.r_en),
        ]
        last = self._last if hi - lo == self._width else self._last[lo:hi]
        with m.If(self.r_en):
            m.d.sync += last.eq(rp.data)

    def _block_ports(self, m, platform, ports, lo, width, name):
        """``(r_addr, w_addr, w_data, w_en)`` as the block holding bits ``lo`` to ``lo +
        width`` of a row sees them: ``ports`` (its group's addresses zero-extended, the data
        padded), or with ``copies`` its own copy of what it uses."""
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
        high_bits = max(0, (self._depth - 1).bit_length() - low)
        r_addrs, w_addrs, sels = self._dp16kd_addresses(m, low, high_bits)
        padded = side * block_width
        w_data = Signal(padded)
        m.d.comb += w_data.eq(self.w_data)
        outputs = []
        for s in range(stacked):
            out = Signal(padded, name=f"stack{s}_data")
            outputs.append(out)
            for c in range(side):
                lo = c * block_width
                g = self._group_of(lo)
                block_ports = self._block_ports(
                    m, platform, (r_addrs[g], w_addrs[g], w_data), lo, block_width, f"dp{s}_{c}"
                )
                m.submodules[f"dp16kd_{s}_{c}"] = self._dp16kd(
                    block_ports, s, lo, block_width, low, high_bits, out
                )
        chosen = []
        for sel in sels:
            data = outputs[0]
            for s in range(1, stacked):
                data = Mux(sel == s, outputs[s], data)
            chosen.append(data)
        if self._groups > 1:  # each block's bits as its group's read chose them
            data = Cat(
                chosen[self._group_of(lo)][lo : lo + block_width]
                for lo in range(0, padded, block_width)
            )
        self._last = Signal(self._width, name="read_data")
        m.d.comb += self._last.eq(data[: self._width])
        return m

    def _dp16kd_addresses(self, m: Module, low: int, high_bits: int):
        """Each group's read and write addresses zero-extended to the block's address bits,
        and which stacked block's output to take (``sels``): the read's high address bits,
        delayed with the data (address register, then output register; with copies the copy
        first), the last of them per group."""
        r_addrs, w_addrs, sels = [], [], []
        for g, (r, w) in enumerate(zip(*self._addresses(), strict=True)):
            names = (None, None) if self._groups == 1 else (f"r_addr{g}", f"w_addr{g}")
            r_addr, w_addr = (
                Signal(low + high_bits, name=names[0]),
                Signal(low + high_bits, name=names[1]),
            )
            m.d.comb += [r_addr.eq(r), w_addr.eq(w)]
            r_addrs.append(r_addr)
            w_addrs.append(w_addr)
            r_high = r_addr[low:] if high_bits else Const(0, 1)
            suffix = "" if self._groups == 1 else f"_{g}"
            sel = [
                Signal(max(1, high_bits), name=f"stack_sel{i}{suffix}")
                for i in range(2 + self._copies)
            ]
            with m.If(self.r_en):
                m.d.sync += [
                    sel[0].eq(r_high),
                    *(a.eq(b) for a, b in zip(sel[1:], sel, strict=False)),
                ]
            sels.append(sel[-1])
        return r_addrs, w_addrs, sels

    def _dp16kd(self, block_ports, s, lo, block_width, low, high_bits, out) -> Instance:
        """The DP16KD of stack row ``s`` holding bits ``lo`` on of the row, at its ports
        (:meth:`_block_ports`), its output into ``out``."""
        b_r_addr, b_w_addr, b_w_data, b_w_en = block_ports
        shift = 14 - low  # DP16KD addresses count in units of 1/2**shift of a word
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
        return Instance(
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
