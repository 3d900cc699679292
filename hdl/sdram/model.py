"""A cycle-accurate model of an SDR SDRAM on its pins, which checks every timing rule.

:class:`SDRAMModel` is plain Python (no Amaranth): one call of :meth:`SDRAMModel.clock` per
rising clock edge with the command pins as the chip samples them at that edge, returning the
value the chip drives on DQ for the next edge (``None`` when it does not drive). The Amaranth
simulator drives it through :func:`nfacep.hdl.sdram.sim.sdram_process`; a cocotb testbench can
call :meth:`~SDRAMModel.clock` the same way from a ``RisingEdge`` loop.

It models what the controller relies on: the power-up wait and initialisation (precharge all,
refreshes, mode register), one open row per bank, ACTIVE / READ / WRITE / PRECHARGE (one bank
or all) / AUTO REFRESH / MODE REGISTER SET / BURST STOP, the mode register's CAS latency
(read data is driven for the edge ``CL`` clocks after the READ), burst length 1, and the
stored words. Every rule a command can break raises :class:`SDRAMTimingError`, which names the
rule (``tRCD``, ``tRP``, ``tRAS``, ``tRAS max``, ``tRC``, ``tRRD``, ``tWR``, ``tRFC``,
``tMRD``, ``tREFI``, ``CL``, ``power-up``, ``init``, ``state``, ``bus``, ``address``,
``unsupported``), the cycle (edges counted from 0) and the bank:

- ``tREFI``: more than ``trefi`` clocks since the last REFRESH (once one has been given);
- ``tRAS max``: a row open more than ``tras_max`` clocks;
- ``bus``: the controller drives DQ at an edge where the chip drives read data, or at the edge
  right after it (one clock of turnaround), or a WRITE without the controller driving DQ;
- ``state``: ACTIVE to a bank with an open row, READ/WRITE to a bank without one, REFRESH or
  MODE REGISTER SET with a row open;
- ``unsupported``: auto-precharge (A10 with READ/WRITE), a burst length other than 1, a
  reserved mode register field.

Words never written read as a pattern made from their address (not zero: real SDRAM powers up
with anything in it, and a controller or store that counts on zeros must fail here).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .timing import SDRAMCycles, SDRAMGeometry

__all__ = ["SDRAMModel", "SDRAMTimingError", "unwritten"]

NEVER = -(10**18)


class SDRAMTimingError(AssertionError):
    """A command broke a rule of the SDRAM: ``rule``, at edge ``cycle``, on ``bank`` (``None``
    when the rule is not about one bank)."""

    def __init__(self, rule: str, cycle: int, bank: int | None, detail: str):
        where = f"cycle {cycle}" + ("" if bank is None else f", bank {bank}")
        super().__init__(f"SDRAM {rule} violated at {where}: {detail}")
        self.rule, self.cycle, self.bank, self.detail = rule, cycle, bank, detail


def unwritten(bank: int, row: int, column: int, width: int = 32) -> int:
    """What a word never written reads as in the model."""
    x = (bank * 0x9E3779B1 + row * 0x85EBCA77 + column * 0xC2B2AE3D + 0x5A5A5A5A) & 0xFFFFFFFF
    x ^= x >> 15
    return (x * 0x2C1B3C6D) & ((1 << width) - 1)


@dataclass
class _Bank:
    row: int | None = None
    activated: int = NEVER
    precharged: int = NEVER
    written: int = NEVER


# (ras, cas, we) -> command, all active-high ("asserted")
COMMANDS = {
    (0, 0, 0): "NOP",
    (1, 0, 0): "ACTIVE",
    (0, 1, 0): "READ",
    (0, 1, 1): "WRITE",
    (1, 0, 1): "PRECHARGE",
    (1, 1, 0): "REFRESH",
    (1, 1, 1): "MODE",
    (0, 0, 1): "BURST STOP",
}


class SDRAMModel:
    """One SDR SDRAM (or chips side by side acting as one) of ``geometry`` with ``cycles``."""

    def __init__(self, geometry: SDRAMGeometry, cycles: SDRAMCycles):
        self.geometry, self.t = geometry, cycles
        self.cycle = -1
        self.banks = [_Bank() for _ in range(geometry.banks)]
        self.memory: dict[tuple[int, int, int], int] = {}
        self.out: dict[int, int] = {}  # edge -> value driven on DQ for it
        self.last_activate = (NEVER, -1)
        self.last_refresh = NEVER
        self.last_mode = NEVER
        self.cas_latency: int | None = None
        self.precharged_all = False
        self.refreshes = 0
        self.counts: Counter[str] = Counter()
        #: every command but NOP as (cycle, command, bank, address), when a list is given
        self.trace: list[tuple[int, str, int, int]] | None = None

    # --- the pins ------------------------------------------------------------------------------

    def clock(
        self, ras: int, cas: int, we: int, ba: int, a: int, dq_o: int, dq_oe: int, cs: int = 1
    ) -> int | None:
        """One rising edge: the command pins (active-high: 1 = asserted) as sampled at it.
        Returns what the chip drives on DQ for the next edge, or ``None``."""
        self.cycle += 1
        command = COMMANDS[(ras, cas, we)] if cs else "NOP"
        self._deadlines()
        if dq_oe and (self.cycle in self.out or self.cycle - 1 in self.out):
            self._fail("bus", None, "the controller drives DQ while the chip drives read data")
        self.counts[command] += 1
        if command != "NOP":
            if self.trace is not None:
                self.trace.append((self.cycle, command, ba, a))
            self._command(command, ba, a, dq_o, dq_oe)
        self.out.pop(self.cycle - 1, None)
        return self.out.get(self.cycle + 1)

    def peek(self, bank: int, row: int, column: int) -> int:
        """The word stored at (bank, row, column)."""
        key = (bank, row, column)
        return self.memory.get(key, unwritten(*key, self.geometry.width))

    # --- rules ---------------------------------------------------------------------------------

    def _fail(self, rule: str, bank: int | None, detail: str) -> None:
        raise SDRAMTimingError(rule, self.cycle, bank, detail)

    def _since(self, rule: str, bank: int | None, then: int, need: int, what: str) -> None:
        gap = self.cycle - then
        if gap < need:
            self._fail(rule, bank, f"{what} {gap} clocks before, needs {need}")

    def _deadlines(self) -> None:
        t = self.t
        if self.last_refresh != NEVER and self.cycle - self.last_refresh > t.trefi:
            self._fail("tREFI", None, f"no REFRESH for {self.cycle - self.last_refresh} clocks")
        for i, b in enumerate(self.banks):
            if b.row is not None and self.cycle - b.activated > t.tras_max:
                self._fail("tRAS max", i, f"row {b.row} open {self.cycle - b.activated} clocks")

    def _command(self, command: str, ba: int, a: int, dq_o: int, dq_oe: int) -> None:
        t = self.t
        if self.cycle < t.power_up:
            self._fail("power-up", None, f"{command} before {t.power_up} clocks of power-up")
        if not self.precharged_all and not (command == "PRECHARGE" and a >> 10 & 1):
            self._fail("init", None, f"{command} before the first PRECHARGE all")
        self._since("tRFC", None, self.last_refresh, t.trfc, f"{command}: REFRESH")
        self._since("tMRD", None, self.last_mode, t.tmrd, f"{command}: MODE REGISTER SET")
        if ba >= self.geometry.banks:
            self._fail("address", ba, f"{command} to bank {ba} of {self.geometry.banks}")
        if command == "ACTIVE":
            self._activate(ba, a)
        elif command in ("READ", "WRITE"):
            self._access(command, ba, a, dq_o, dq_oe)
        elif command == "PRECHARGE":
            for i in range(len(self.banks)) if a >> 10 & 1 else [ba]:
                self._precharge(i)
            self.precharged_all |= bool(a >> 10 & 1)
        elif command == "REFRESH":
            self._refresh()
        elif command == "MODE":
            self._mode(a)

    def _activate(self, ba: int, a: int) -> None:
        t, b = self.t, self.banks[ba]
        if self.cas_latency is None or self.refreshes < t.init_refreshes:
            self._fail("init", ba, "ACTIVE before the refreshes and mode register of init")
        if b.row is not None:
            self._fail("state", ba, f"ACTIVE row {a} while row {b.row} is open")
        if a >= self.geometry.rows:
            self._fail("address", ba, f"row {a} of {self.geometry.rows}")
        self._since("tRP", ba, b.precharged, t.trp, "ACTIVE: PRECHARGE")
        self._since("tRC", ba, b.activated, t.trc, "ACTIVE: ACTIVE")
        when, other = self.last_activate
        if other != ba:
            self._since("tRRD", ba, when, t.trrd, f"ACTIVE: ACTIVE of bank {other}")
        b.row, b.activated = a, self.cycle
        self.last_activate = (self.cycle, ba)

    def _access(self, command: str, ba: int, a: int, dq_o: int, dq_oe: int) -> None:
        b, width = self.banks[ba], self.geometry.width
        if b.row is None:
            self._fail("state", ba, f"{command} with no row open")
        self._since("tRCD", ba, b.activated, self.t.trcd, f"{command}: ACTIVE")
        if a >> 10 & 1:
            self._fail("unsupported", ba, f"{command} with auto-precharge (A10)")
        column = a & ~(1 << 10)
        if column >= self.geometry.columns:
            self._fail("address", ba, f"column {column} of {self.geometry.columns}")
        key = (ba, b.row, column)
        if command == "WRITE":
            if not dq_oe:
                self._fail("bus", ba, "WRITE without the controller driving DQ")
            self.memory[key] = dq_o & ((1 << width) - 1)
            b.written = self.cycle
        else:
            assert self.cas_latency is not None  # _activate checked it
            self.out[self.cycle + self.cas_latency] = self.peek(*key)

    def _precharge(self, ba: int) -> None:
        b = self.banks[ba]
        if b.row is None:
            return  # precharging an idle bank is a NOP
        self._since("tRAS", ba, b.activated, self.t.tras, "PRECHARGE: ACTIVE")
        self._since("tWR", ba, b.written, self.t.twr, "PRECHARGE: WRITE")
        b.row, b.precharged = None, self.cycle

    def _all_idle(self, command: str) -> None:
        for i, b in enumerate(self.banks):
            if b.row is not None:
                self._fail("state", i, f"{command} while row {b.row} is open")
            self._since("tRP", i, b.precharged, self.t.trp, f"{command}: PRECHARGE")
            self._since("tRC", i, b.activated, self.t.trc, f"{command}: ACTIVE")

    def _refresh(self) -> None:
        self._all_idle("REFRESH")
        self.last_refresh = self.cycle
        self.refreshes += 1

    def _mode(self, a: int) -> None:
        self._all_idle("MODE REGISTER SET")
        burst, latency, reserved = a & 0b111, a >> 4 & 0b111, a >> 7 & 0b11
        if burst != 0:
            self._fail("unsupported", None, f"burst length code {burst} (only 1 is modelled)")
        if reserved or a >> 10:
            self._fail("unsupported", None, f"reserved mode register bits in {a:#x}")
        if latency not in (2, 3) or latency < self.t.cas_latency:
            self._fail("CL", None, f"CAS latency {latency} (this clock needs {self.t.cas_latency})")
        self.cas_latency = latency
        self.last_mode = self.cycle
