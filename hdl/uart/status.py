"""The UART link's STATUS counters (:class:`StatusCounters`, a base of
:class:`~nfacep.hdl.uart.framer.Framer`): the counters' names and where they stand in STATUS,
the two byte-wide block-RAM copies they live in (``live``, counted into, and ``shown``, what a
STATUS or ACK frame sends), the sweep that adds the counts waiting, and the snapshot the frames
and the counters agree on."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Mux, Signal
from amaranth.lib.memory import Memory

from nfacep.links.uart.protocol import ACK_FIELDS, ERROR_COUNTERS, STATUS_FIELDS

__all__ = ["COUNTED", "COUNTERS", "DEFRAMED", "StatusCounters"]

#: The STATUS counters, kept by the :class:`Framer` (in STATUS order, one run of fields). It
#: counts ``matched``, ``drops`` and ``records`` from the records it sends; the others count the
#: pulses on its ``count`` port.
COUNTERS = ("tuples", "matched", "drops", "records", "frames", *ERROR_COUNTERS)
#: The counters that count pulses on the :class:`Framer`'s ``count`` port.
COUNTED = tuple(name for name in COUNTERS if name not in ("matched", "drops", "records"))
#: Those of them that count the deframer's events (it pulses one at a time).
DEFRAMED = ("frames", "bad_type", "bad_length", "bad_crc", "truncated", "out_of_seq", "overflow")
assert set(COUNTED) == {"tuples", "uart_errors", *DEFRAMED}


def _offsets(fields) -> dict[str, tuple[int, int]]:
    out, at = {}, 0
    for name, n in fields:
        out[name] = (at, n)
        at += n
    return out


_STATUS_AT = _offsets(STATUS_FIELDS)
_STATUS_BYTES = sum(n for _, n in STATUS_FIELDS)
# what the framer's layout relies on
assert [name for name, _ in STATUS_FIELDS[-len(COUNTERS) :]] == list(COUNTERS)
assert ACK_FIELDS == (("next_seq", 1), ("tuples", 4)) and COUNTERS[0] == "tuples"
assert _STATUS_AT["flags"] == (1, 1) and _STATUS_AT["next_seq"] == (2, 1)


def _memory(m, name: str, depth: int, init=()):
    """A byte-wide memory for block RAM: its write port and the address and data of a read
    port with one cycle of latency.

    The read port is asynchronous and its data registered outside it: Yosys then merges the
    register into the block RAM without the logic that would make a same-address read and write
    in one cycle return the old byte, since ``no_rw_check`` says the design does not care.
    Where the blocks here read and write one address in the same cycle, they ignore what is
    read.
    """
    m.submodules[name] = memory = Memory(
        shape=8, depth=depth, init=list(init), attrs={"no_rw_check": True, "ram_style": "block"}
    )
    rp = memory.read_port(domain="comb")
    data = Signal(8, name=f"{name}_data", reset_less=True)
    m.d.sync += data.eq(rp.data)
    return memory.write_port(), rp.addr, data


#: ACK's payload is STATUS's ``next_seq`` and ``tuples``: the framer sends it from the index just
#: before STATUS's ``tuples`` (where it puts ``next_seq``) to the end of ``tuples``.
_ACK_AT = _STATUS_AT["tuples"][0] - 1


class _Snapshot:
    """What the :class:`Framer`'s frames and its counters tell each other."""

    def __init__(self):
        self.freeze = Signal()  # a STATUS or ACK frame starts
        self.frozen = Signal()  # one goes out: counts go to `live` only, `shown` stays
        self.thaw = Signal()  # it ends
        self.settled = Signal()  # `shown` equals `live` and may be frozen now
        self.pending = Signal()  # a count not yet in `live`
        self.taken = Signal()  # a record is taken


class StatusCounters:
    """The counters of a :class:`~nfacep.hdl.uart.framer.Framer` (which sets the members and
    settings these read)."""

    def _counters(self, m, snapshot):
        """The counters' memories and their sweep; returns the address and data of ``shown``'s
        read port.

        Each cycle one byte of ``live`` is written back, to both copies, plus the counts that
        came since its counter's last turn (at its first byte) or the carry (at the others). A
        byte is read the cycle before it is written: RESET's zeroing starts with that read and
        lasts a sweep (``live`` has twice the room: its upper half, never written, reads 0).

        ``shown`` is not written while a frame reads it (from ``freeze`` to ``thaw``). A frame
        starts only between two counters, when ``shown`` is whole: a whole sweep after the last
        frame (whose counters were torn where its counts went to ``live`` only), no zeroing
        under way, and no record's counts waiting (a STATUS frame after a RECORD frame counts
        it).
        """
        depth = 1 << (_STATUS_BYTES - 1).bit_length()
        lw, live_addr, live_data = _memory(m, "live", 2 * depth)
        sw, shown_addr, shown_data = _memory(m, "shown", depth, self._image)
        lo, hi = _STATUS_AT[COUNTERS[0]][0], _STATUS_BYTES - 1  # the counters' bytes
        sweep = hi - lo + 1
        addr = Signal(range(depth), init=lo)  # the byte written this cycle
        following = Signal.like(addr)
        m.d.comb += following.eq(Mux(addr == hi, lo, addr + 1))
        head, amount, records_waiting = self._waiting_counts(m, snapshot, addr)
        carry = Signal(reset_less=True)
        zeroing = Signal(range(sweep + 1), reset_less=True)  # cycles left zeroing (RESET)
        stale = Signal(2, reset_less=True)  # sweep ends before `shown` is whole again
        total = Signal(9)
        m.d.comb += [
            live_addr.eq(Cat(following, self.clear | (zeroing[1:] != 0))),
            total.eq(live_data + Mux(head, amount, carry)),
            lw.addr.eq(addr),
            lw.data.eq(total[:8]),
            lw.en.eq(1),
            sw.addr.eq(addr),
            sw.data.eq(total[:8]),
            sw.en.eq(~snapshot.frozen & ~snapshot.freeze),
            snapshot.settled.eq(head & (zeroing == 0) & (stale == 0) & ~records_waiting),
        ]
        m.d.sync += [addr.eq(following), carry.eq(total[8])]
        with m.If(zeroing != 0):
            m.d.sync += zeroing.eq(zeroing - 1)
        with m.If(self.clear):  # zero every byte, starting with the next one
            m.d.sync += [zeroing.eq(sweep), carry.eq(0)]
        with m.If((addr == hi) & (stale != 0)):
            m.d.sync += stale.eq(stale - 1)
        with m.If(snapshot.thaw):  # a whole sweep from the next wrap
            m.d.sync += stale.eq(2)
        return shown_addr, shown_data

    def _waiting_counts(self, m, snapshot, addr):
        """The counts that wait for their counter's turn (at most a sweep), and what is added
        to the byte at ``addr``. Returns ``head`` (``addr`` is a counter's first byte), the
        ``amount`` added there and whether a record's counts wait; drives ``pending``.

        A turn takes its counter's counts; RESET forgets them all: what pulses in its cycle
        counts after it. The deframer's counters share one flag, as it pulses them one at a
        time, at most once a sweep.
        """
        record = self.i_stream.payload
        taken = snapshot.taken
        tuples = Signal(5, reset_less=True)
        recorded = {
            name: Signal(name=f"count_{name}", reset_less=True)
            for name in ("matched", "drops", "records")
        }
        uart = Signal(reset_less=True)
        deframed = Signal(reset_less=True)  # one of DEFRAMED, `which`
        which = Signal(range(len(DEFRAMED)), reset_less=True)
        pulses = {
            "tuples": self.count.tuples,
            "matched": taken & record.matches.any(),
            "drops": taken & record.dropped,
            "records": taken,
            "uart_errors": self.count.uart_errors,
        }
        flags = [*recorded.items(), ("uart_errors", uart)]
        bases = Array([Const(_STATUS_AT[name][0], len(addr)) for name in DEFRAMED])

        def turn(name):
            return addr == _STATUS_AT[name][0]

        head = Signal()
        amount = Signal(len(tuples))
        m.d.comb += head.eq(Cat(*(turn(name) for name in COUNTERS)).any())
        with m.If(turn("tuples")):
            m.d.comb += amount.eq(tuples)
        for name, flag in flags:
            with m.If(turn(name)):
                m.d.comb += amount.eq(flag)
        with m.If(addr == bases[which]):
            m.d.comb += amount.eq(deframed)

        restart = self.clear
        m.d.sync += tuples.eq(Mux(restart | turn("tuples"), 0, tuples) + pulses["tuples"])
        for name, flag in flags:
            m.d.sync += flag.eq(Mux(restart | turn(name), 0, flag) | pulses[name])
        with m.If(restart | (addr == bases[which])):
            m.d.sync += deframed.eq(0)
        for i, name in enumerate(DEFRAMED):
            with m.If(getattr(self.count, name)):
                m.d.sync += [deframed.eq(1), which.eq(i)]

        records_waiting = Cat(*recorded.values()).any()
        m.d.comb += snapshot.pending.eq((tuples != 0) | records_waiting | uart | deframed)
        return head, amount, records_waiting

    # ----------------------------------------------------------------------- the frames
