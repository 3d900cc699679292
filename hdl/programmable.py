"""The programmable engine: one gateware for every query file that fits (docs/formats.md,
"Configuration images").

Built from a stream declaration and capacities (:class:`nfacep.image.EngineShape`), not from
a query: atoms, truth tables, the activation matrix, start and accept masks, query slots and
after-match modes are registers, written through ``i_config`` with a load of a
configuration image (:func:`nfacep.image.load`), in force from a stated tuple on; a switch
clears every partition's states at once by moving to a new epoch (docs/language.md,
"Switching queries at a tuple"). Otherwise it is the fixed engine
(:class:`nfacep.hdl.engine.Engine`): the same tuple and record streams, the same partition
stores (pipeline, table or SDRAM, their capacity, timers and drop counting; the table in its
simple form unless it spreads over the device, :meth:`ProgrammableEngine._table_options`; the
SDRAM's pins and chip as the fixed engine's, :class:`~.engine_shared.SdramPins`), the same
record filter.

atoms ▸ guards ▸ FIFO ▸ partition store (activation matrix) ▸ record filter. Each tuple's
atoms are evaluated from the configuration, then each state's guard, its truth table indexed
by the atoms it reads: the guard vector (one bit per state slot) is what the partition store
carries, as the fixed engine's carries its predicate vector, and the store's update is the
NFA step over the configured matrix: state ``i`` is set iff its guard holds and it is a start
state or a state of its activation mask was set. Under WITHIN the store also carries the
tuple's ORDER BY value, and a timed slot of a windowed query is reached only by a live run
(:mod:`.programmable_entry`).
"""

from __future__ import annotations

import json
import os

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import crc, data, stream, wiring
from amaranth.lib.wiring import In, Out

from nfacep.image import (
    AT_BYTES,
    ATOMS_PER_STATE,
    Capacity,
    EngineShape,
    body_size,
    config_fields,
    image,
    load_size,
)
from nfacep.nfa import Nfa
from nfacep.params import EngineParams
from nfacep.settings import ParamValues
from nfacep.wire import SEQ_BITS

from .engine import interface
from .engine_shared import (
    SdramPins,
    cycles_per_tuple,
    partition_key,
    partition_store,
    record_filter,
    table_sidecar,
)
from .layout import tuple_layout
from .programmable_entry import EPOCH_BITS, entry_widths, operand_shape, timed_slots, within
from .programmable_guards import ProgrammableGuards
from .sdram.timing import SDRAMSetup
from .stream import StreamBuffer, StreamQueue

__all__ = [
    "CONFIG_PORT",
    "EPOCH_BITS",
    "ProgrammableEngine",
    "config_layout",
    "entry_widths",
    "operand_shape",
    "write_verilog",
]

#: the configuration port's payload: a byte of a load (:func:`nfacep.image.load`), ``last``
#: on its final byte
CONFIG_PORT = data.StructLayout({"data": 8, "last": 1})


def config_layout(shape: EngineShape) -> data.StructLayout:
    """The configuration registers: :func:`nfacep.image.config_fields` as a layout (a name
    ``x.y`` becomes ``x_y``), so that the image's word drives it directly."""
    fields = config_fields(shape)
    return data.StructLayout({name.replace(".", "_"): width for name, width in fields})


class ProgrammableEngine(SdramPins, ProgrammableGuards, wiring.Component):
    """Complex event detection engine whose queries are configuration.

    Parameters
    ----------
    shape : :class:`nfacep.image.EngineShape`
        The stream declaration, partition key and capacities (``S`` states, ``A`` atoms,
        ``Q`` query slots).
    params : :class:`nfacep.params.EngineParams`
        The partition store, as for the fixed engine. With ``engine="programmable"`` its
        ``states``, ``atoms`` and ``queries`` must be ``shape``'s capacities.
    sdram : :class:`~nfacep.hdl.sdram.timing.SDRAMSetup` or None
        With ``store="sdram"``: the chip (a board's), as for the fixed engine; its entries
        are the programmable entry (:func:`~.programmable_entry.entry_widths`: the states,
        the epoch and, with timed slots, their run starts and the last ORDER BY value), so a
        switch clears every partition in the chip as in the table, by the epoch.

    Members
    -------
    i_stream, o_stream, tuples, matched, drops
        As :class:`~nfacep.hdl.engine.Engine`'s; a record's ``matches`` has one bit per query
        slot (bit ``q``: the file's query ``q``).
    i_config : ``In(stream.Signature(CONFIG_PORT))``
        Loads (:func:`nfacep.image.load`), a byte per transfer, ``last`` on the final one:
        the tuple number a load is in force from, the engine's fingerprint, the body of a
        configuration image and a CRC-32. A whole, checked load is in force from that tuple
        on, with a new epoch (every partition's states read as empty); tuples from that
        number on wait for it, and it waits for the tuples in flight.
    configured : ``Out(1)``
        A load has been in force since power-up (before it, no state is ever set: the
        registers are all zero). A reset keeps the configuration and a load waiting for its
        tuple (the UDP link's RESET clears the partitions and the counters, ``refused`` among
        them); a load being received when it comes is refused (its CRC starts again).
    refused : ``Out(counter_width)``
        Loads refused: for another engine, of another length, or with a wrong CRC.
    image : ``Out(64)``
        The fingerprint of the image in force (its 8 bytes, the first in the low bits; 0
        before the first load), as the load names it.
    image_from : ``Out(counter_width)``
        The first tuple the image in force judged: the tuple count when it took over (0 after
        a reset: the image has judged every tuple since).
    checking : ``Out(1)``
        High from the cycle after a load's last byte is taken until its outcome shows: counted
        in ``refused``, in force (``image``, ``image_from``), not applied again (the last load
        taken, again), or waiting for its tuple (the tuple count has not reached it). The
        port takes no byte meanwhile.

    Only with ``store="sdram"`` and PARTITION:

    sdram : ``Out(pins_signature(geometry))``
        The SDRAM chip's pins, as the fixed engine's (:class:`~.engine_shared.SdramPins`:
        :attr:`sdram_setup`, :meth:`use_sdram`). A table the chip cannot hold raises
        :class:`~nfacep.errors.HardwareLimitError` here, before anything is elaborated.
    """

    def __init__(
        self,
        shape: EngineShape,
        params: EngineParams = EngineParams(),
        *,
        seq_width: int = SEQ_BITS,
        counter_width: int = 32,
        fifo_depth: int = 8,
        sdram: SDRAMSetup | None = None,
    ):
        if params.engine == "programmable" and Capacity.of(params) != shape.capacity:
            c = shape.capacity
            raise ValueError(
                f"--states {params.states} --atoms {params.atoms} --queries {params.queries} "
                f"are not the shape's capacity ({c.states} states, {c.atoms} atoms, "
                f"{c.queries} queries)"
            )
        self._shape = shape
        self._params = params
        self._seq_width = seq_width
        self._fifo_depth = fifo_depth
        self._config_layout = config_layout(shape)
        self._tuple_layout = tuple_layout(shape.schema)
        key_width = sum(shape.schema.field(n).type.bits for n in shape.partition_fields)
        self._key_bits = key_width or 1
        self._record_layout = data.StructLayout(
            {
                "seq": seq_width,
                "partition": self._key_bits,
                "matches": shape.capacity.queries,
                "dropped": 1,
            }
        )
        self._store = None
        pins = self._sdram_members(
            params, bool(shape.partition_fields), self._key_bits, self._state_width, sdram
        )
        super().__init__(
            {
                **pins,
                "i_stream": In(stream.Signature(self._tuple_layout)),
                "o_stream": Out(stream.Signature(self._record_layout)),
                "i_config": In(stream.Signature(CONFIG_PORT)),
                "configured": Out(1),
                "refused": Out(counter_width),
                "image": Out(64),
                "image_from": Out(counter_width),
                "checking": Out(1),
                "tuples": Out(counter_width),
                "matched": Out(counter_width),
                "drops": Out(counter_width),
            }
        )

    @property
    def shape(self) -> EngineShape:
        return self._shape

    @property
    def params(self) -> EngineParams:
        return self._params

    @property
    def record_layout(self) -> data.StructLayout:
        return self._record_layout

    @property
    def tuple_layout(self) -> data.StructLayout:
        return self._tuple_layout

    @property
    def cycles_per_tuple(self) -> int:
        """Cycles a tuple takes at full throughput (:func:`~.engine_shared.cycles_per_tuple`);
        the link's board top sizes the engine's clock with it."""
        return cycles_per_tuple(bool(self._shape.partition_fields), self._params)

    @property
    def store(self):
        """The partition store of the last elaboration (None without PARTITION)."""
        return self._store

    def elaborate(self, platform):
        m = Module()
        self._epoch = Signal(EPOCH_BITS, name="epoch")
        self._block = Signal(name="config_block")
        self._empty = Signal(name="pipeline_empty")
        config = self._configuration(m)
        guards, time = self._guards(m, config)
        matcher, results = self._matcher(m, config)
        self._front(m, Cat(guards, time), matcher)
        record_filter(
            m,
            results,
            self.o_stream,
            self.matched,
            self._record_layout,
            seq_width=self._seq_width,
        )
        # the tuples taken and not yet through the record filter: a load is applied only
        # when none is left, so that every tuple is judged whole by one configuration
        inflight = Signal(range(2 * self._params.partitions + 4 * self._fifo_depth + 64))
        took = self.i_stream.valid & self.i_stream.ready
        gave = results.valid & results.ready
        m.d.sync += inflight.eq(inflight + took - gave)
        m.d.comb += self._empty.eq((inflight == 0) & ~took)
        return m

    def _configuration(self, m: Module) -> data.View:
        """The configuration registers and the port that loads them (:func:`nfacep.image.load`:
        the tuple number it is in force from, the engine's fingerprint, the body, a CRC-32).
        A whole, checked load waits (``pending``) until the tuple count reaches its number and
        no tuple is in flight, then is in force at once, with a new epoch: every partition's
        states read as empty from then on. From its number on, tuples wait for it; a load for
        another engine, of another length or with a wrong CRC is counted in ``refused`` and
        changes nothing. A load identical to the last one taken (the same image fingerprint
        and tuple number: a loader sending it again when an answer was lost) changes nothing
        either: it is not applied twice.

        The loader's registers and the configuration have no reset (they start at zero):
        a reset keeps them (``configured`` says what it leaves)."""
        shape = self._shape
        nbytes = body_size(shape)
        prints = len(shape.fingerprint)
        named = Signal(64, name="config_image", reset_less=True)
        total = load_size(shape)
        shadow = Signal(nbytes * 8, name="config_shadow", reset_less=True)
        active = Signal(nbytes * 8, name="config_active", reset_less=True)
        at = Signal(AT_BYTES * 8, name="config_at", reset_less=True)
        count = Signal(range(total + 1), name="config_count", reset_less=True)
        pending = Signal(name="config_pending", reset_less=True)
        foreign = Signal(name="config_foreign", reset_less=True)
        ended = Signal(name="config_ended", reset_less=True)
        whole = Signal(name="config_whole", reset_less=True)
        in_force = Signal(64, name="config_in_force", reset_less=True)
        configured = Signal(name="config_configured", reset_less=True)
        m.d.comb += [self.image.eq(in_force), self.configured.eq(configured)]
        port = self.i_config
        m.submodules.config_crc = check = crc.catalog.CRC32_ISO_HDLC(data_width=8).create()
        fingerprint = Const(int.from_bytes(shape.fingerprint, "little"), 8 * prints)
        took = port.valid & port.ready
        m.d.comb += [
            port.ready.eq(~pending & ~ended),
            check.data.eq(port.payload.data),
            check.valid.eq(took),
            check.start.eq(took & (count == 0)),
        ]
        m.d.sync += ended.eq(0)
        with m.If(took):
            with m.If(count < total):
                m.d.sync += count.eq(count + 1)
            with m.If(count < AT_BYTES):
                m.d.sync += at.eq(Cat(at[8:], port.payload.data))
            with m.Elif(count < AT_BYTES + prints):
                byte = fingerprint.word_select(
                    (count - AT_BYTES)[: max(1, (prints - 1).bit_length())], 8
                )
                with m.If(port.payload.data != byte):
                    m.d.sync += foreign.eq(1)
            with m.Elif(count < AT_BYTES + prints + 8):
                m.d.sync += named.eq(Cat(named[8:], port.payload.data))
            with m.Elif(count < AT_BYTES + prints + 8 + nbytes):
                m.d.sync += shadow.eq(Cat(shadow[8:], port.payload.data))
            with m.If(port.payload.last):
                m.d.sync += [
                    count.eq(0),
                    foreign.eq(0),
                    ended.eq(1),
                    whole.eq((count == total - 1) & ~foreign),
                ]
        with m.If(ended):  # the CRC has taken the last byte
            self._ended(m, whole & check.match_detected, named, at, pending)
        due = Signal(AT_BYTES * 8, name="config_due")
        m.d.comb += [
            due.eq(self.tuples - at),
            self._block.eq((pending | ended | (count >= AT_BYTES)) & ~due[-1]),
            self.checking.eq(ended | (pending & ~due[-1])),
        ]
        with m.If(pending & ~due[-1] & self._empty):
            m.d.sync += [
                active.eq(shadow),
                in_force.eq(named),
                self.image_from.eq(self.tuples),  # (none taken now: ``_block`` holds them)
                pending.eq(0),
                self._epoch.eq(self._epoch + 1),
                configured.eq(1),
            ]
        return self._config_layout(active[: self._config_layout.size])

    def _ended(self, m: Module, good, named, at, pending) -> None:
        """A whole load received: a ``good`` one waits for its tuple (``pending``) unless it
        is the last one taken again (the same image fingerprint ``named`` and tuple ``at``),
        a bad one is counted in ``refused``."""
        last_named = Signal(64, name="config_last_image", reset_less=True)
        last_at = Signal(len(at), name="config_last_at", reset_less=True)
        taken = Signal(name="config_taken", reset_less=True)
        with m.If(good):
            m.d.sync += [
                pending.eq(~taken | (named != last_named) | (at != last_at)),
                last_named.eq(named),
                last_at.eq(at),
                taken.eq(1),
            ]
        with m.Else():
            m.d.sync += self.refused.eq(self.refused + 1)

    def _update(self, config):
        """The NFA step over the configured matrix: ``(stored state, match bits)``."""
        c = self._shape.capacity

        def update(mod, stored_state, payload):
            # an entry written in another epoch (before the last switch) reads as empty
            state = Signal(c.states, name="live")
            mod.d.comb += state.eq(self._live(stored_state))
            guards = Value.cast(payload)[: c.states]
            windowed = self._windows(mod, config, stored_state, state, payload)
            nxt = Signal(c.states, name="next")
            for i in range(c.states):
                reached = (
                    self._field(config, f"state{i}.start")
                    | (self._field(config, f"state{i}.activation") & state).any()
                )
                if i in windowed:  # a slot of a windowed query: reached by a live run
                    reached = Mux(windowed[i][0], windowed[i][1], reached)
                mod.d.comb += nxt[i].eq(guards[i] & reached)
            members = [
                Cat(self._field(config, f"state{i}.query")[q] for i in range(c.states))
                for q in range(c.queries)
            ]
            accept = Cat(self._field(config, f"state{i}.accept") for i in range(c.states))
            matches = Signal(c.queries, name="slot_matches")
            cleared = Signal(c.states, name="cleared")
            clear = Const(0, c.states)
            for q, member in enumerate(members):
                mod.d.comb += matches[q].eq((nxt & accept & member).any())
                skip = self._field(config, f"query{q}.skip")
                clear = clear | Mux(matches[q] & skip, member, 0)
            mod.d.comb += cleared.eq(clear)
            stored = Signal(self._state_width, name="stored")
            starts = [windowed[i][2] for i in sorted(windowed)]
            time = Value.cast(payload)[c.states :]
            mod.d.comb += stored.eq(Cat(nxt & ~cleared, self._epoch, *starts, time))
            return stored, matches

        return update

    @property
    def _state_width(self) -> int:
        return entry_widths(self._shape)[1]

    def _windows(self, mod, config, stored: Value, state: Value, payload: Value) -> dict:
        """WITHIN in the timed slots (:func:`~.programmable_entry.timed_slots`)."""
        field = lambda name: self._field(config, name)  # noqa: E731
        return timed_slots(mod, self._shape, field, stored, state, payload, self._within)

    _within = staticmethod(within)  # (a test breaks it)

    def _live(self, stored: Value) -> Value:
        """The states of a stored entry (states, then epoch): as stored when written in the
        current epoch, else none (the entry is from before the last switch)."""
        c = self._shape.capacity
        return Mux(stored[c.states : c.states + EPOCH_BITS] == self._epoch, stored[: c.states], 0)

    def _matcher(self, m: Module, config):
        """The partition store with the configured NFA step, or one state register without
        PARTITION. Returns the matcher and a stream of ``(key, result, dropped)`` per tuple."""
        c = self._shape.capacity
        outcome = data.StructLayout({"matches": c.queries})
        results = stream.Signature(
            data.StructLayout({"key": self._key_bits, "result": outcome, "dropped": 1})
        ).create()
        update = self._update(config)
        if not self._shape.partition_fields:
            return self._single(m, update, results), results
        m.submodules.partitioner = matcher = partition_store(
            self._params,
            sdram=self._sdram,
            key_shape=self._key_bits,
            payload_shape=entry_widths(self._shape)[0],
            state_width=self._state_width,
            result_shape=outcome.size,
            update=update,
            **self._table_options(),
        )
        self._store = matcher
        self._connect_sdram(m, matcher)
        out = matcher.o_stream
        m.d.comb += [
            results.valid.eq(out.valid),
            out.ready.eq(results.ready),
            results.payload.key.eq(out.payload.key),
            results.payload.result.eq(Mux(out.payload.dropped, 0, out.payload.result)),
            results.payload.dropped.eq(out.payload.dropped),
            self.drops.eq(matcher.drops),
        ]
        return matcher, results

    def _table_options(self) -> dict:
        """The block-RAM table store's options: the simple table unless its blocks spread over
        the device (``registered=None``, :attr:`~nfacep.hdl.table.TablePartitioner.spread`).

        The simple table reads, decides and updates in the cycle after the read, with no write
        in flight to forward. The programmable entry is wide (its states, the epoch and, with
        timed slots, their run starts and the last ORDER BY value: 167 bits at the default
        capacity on marathon's stream), and the registered table forwards every write in
        flight to every way: 60 two-way multiplexers of the whole entry at the default (4
        ways), with their registers. Without them the Colorlight's UDP top maps to 2,153
        fewer LUT4s and 2,752 fewer flip-flops (benchmarks/README.md); the engine runs at the
        line's pace in its own clock domain beside a link (16.45 MHz for marathon's stream
        over UDP), so the longer cycle is affordable there. A table of more than
        :data:`~nfacep.hdl.table.SPREAD_BLOCKS` blocks (the ULX3S-85F's default, 16,384
        entries in 184 blocks) fills the die's block-RAM columns, and the simple table's
        cycle crosses the die (48.3 ns, under the board's 25 MHz): there the registered
        table, whose read, decision and write each have a cycle, and whose forwarding the
        large die has the LUTs for."""
        return {"registered": None} if self._params.store == "table" else {}

    def _single(self, m: Module, update, results):
        """Without PARTITION: one state register, stepped on every tuple, through an output
        register."""
        c = self._shape.capacity
        m.submodules.single = single = StreamBuffer(c.queries)
        state = Signal(self._state_width, name="state")
        inbox = stream.Signature(entry_widths(self._shape)[0]).create()
        stored, matches = update(m, state, inbox.payload)
        m.d.comb += [
            single.i_stream.valid.eq(inbox.valid),
            inbox.ready.eq(single.i_stream.ready),
            single.i_stream.payload.eq(matches),
            results.valid.eq(single.o_stream.valid),
            single.o_stream.ready.eq(results.ready),
            results.payload.result.matches.eq(single.o_stream.payload),
        ]
        with m.If(inbox.valid & inbox.ready):
            m.d.sync += state.eq(stored)
        return inbox

    def _front(self, m: Module, guards, matcher) -> None:
        """Guards and FIFO: each tuple's guard vector (and key), buffered for the matcher."""
        keyed = bool(self._shape.partition_fields)
        sink = matcher.i_stream if keyed else matcher
        item = sink.payload.shape()
        m.submodules.fifo = queue = StreamQueue(item, self._fifo_depth)
        m.d.comb += [  # (a tuple waits while a load due before it is not in force)
            queue.i_stream.valid.eq(self.i_stream.valid & ~self._block),
            self.i_stream.ready.eq(queue.i_stream.ready & ~self._block),
        ]
        if keyed:
            fields = self._shape.partition_fields
            m.d.comb += [
                queue.i_stream.payload.key.eq(partition_key(self.i_stream.payload, fields)),
                queue.i_stream.payload.payload.eq(guards),
            ]
        else:
            m.d.comb += queue.i_stream.payload.eq(guards)
        with m.If(self.i_stream.valid & self.i_stream.ready):
            m.d.sync += self.tuples.eq(self.tuples + 1)
        wiring.connect(m, queue.o_stream, sink if keyed else wiring.flipped(sink))


def write_verilog(
    nfa: Nfa,
    path: str,
    params: EngineParams,
    *,
    name: str = "nfacep_engine",
    values: ParamValues | None = None,
    sdram_mhz: float | None = None,
) -> dict:
    """Write the programmable engine for ``nfa``'s stream declaration and ``params``'
    capacities as Verilog to ``path``, its JSON sidecar beside it (``.json``) and the image
    of ``nfa`` in hex (``.image.hex``): all three whole or not at all. The image is made
    first, so a file that does not fit raises :class:`~nfacep.image.ImageError` before
    anything is built. ``sdram_mhz`` as for :func:`nfacep.hdl.engine.write_verilog`."""
    from nfacep.output import atomic_files

    from .emit import verilog

    program = nfa.program
    shape = EngineShape(program.schema, program.partition_fields, Capacity.of(params))
    img = image(nfa, shape, values)
    engine = ProgrammableEngine(shape, params)
    engine.sdram_clock(sdram_mhz)
    text = verilog(engine, name)
    c = shape.capacity
    sidecar = {
        **interface(engine, program.schema, name),
        "engine": "programmable",
        "capacity": {
            "states": c.states,
            "atoms": c.atoms,
            "queries": c.queries,
            "atoms_per_state": ATOMS_PER_STATE,
            "timed": c.timed,
            "window_bits": c.window_bits,
        },
        "configuration": {
            "bits": config_layout(shape).size,
            "body_bytes": body_size(shape),
            "load_bytes": load_size(shape),
            "engine_fingerprint": shape.fingerprint.hex(),
        },
        **({"sdram": sd} if (sd := engine.sdram_sidecar(engine.store)) else {}),
        **({"table": t} if (t := table_sidecar(engine.store)) else {}),
        "partition_fields": list(program.partition_fields),
        "image": {
            "fingerprint": img.fingerprint,
            "queries": [
                {"name": q.name, "bit": q.index, "skip_past_last_row": q.skip_past_last_row}
                for q in nfa.queries
            ],
        },
        "parameters": params.as_dict(),
    }
    stem = os.path.splitext(path)[0]
    with atomic_files([path, stem + ".json", stem + ".image.hex"], what="-o") as files:
        verilog_file, json_file, image_file = files
        verilog_file.write(text)
        json.dump(sidecar, json_file, indent=2)
        json_file.write("\n")
        image_file.write(img.to_bytes().hex() + "\n")
    return sidecar
