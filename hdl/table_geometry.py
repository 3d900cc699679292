"""The geometry of a table of partitions (:class:`TableGeometry`): its entries, ways, buckets
and entry layout, and its bucket hash, one definition for the block-RAM table
(:class:`~nfacep.hdl.table.TablePartitioner`) and the SDRAM store
(:class:`~nfacep.hdl.sdram.store.SdramPartitioner`)."""

from __future__ import annotations

from amaranth.hdl import Shape, ShapeLike
from amaranth.lib import crc, data

__all__ = ["TableGeometry"]


class TableGeometry:
    """The geometry of a table of partitions, one definition for the stores that keep them as
    the table does (:class:`TablePartitioner` in block RAM,
    :class:`~nfacep.hdl.sdram.store.SdramPartitioner` in SDRAM): ``entries`` entries (a power
    of two) for keys of ``key_shape``, each with a state of ``state_width`` bits; **direct**
    when the key is narrow enough to index the entries (only the ``2**w`` it can address are
    kept), else **hashed**: ``entries / ways`` buckets of ``ways`` entries, a key's bucket
    the low bits of its CRC-32 (:attr:`crc_parameters`). A store sets ``_stamp_bits`` (0
    without timers), which the entry's layout includes. Raises ValueError for arguments out
    of range."""

    _stamp_bits = 0

    def __init__(self, *, key_shape: ShapeLike, state_width: int, entries: int, ways: int):
        key_width = Shape.cast(key_shape).width
        if not isinstance(state_width, int) or state_width < 0:
            raise ValueError(f"State width must be a non-negative integer, not {state_width!r}")
        for name, value in (("Entries", entries), ("Ways", ways)):
            if not isinstance(value, int) or value < 1 or value & (value - 1):
                raise ValueError(f"{name} must be a positive power of two, not {value!r}")
        if ways > entries:
            raise ValueError(f"Ways ({ways}) must not exceed entries ({entries})")
        if key_width < 1:
            raise ValueError("The key must be at least one bit wide")
        self._key_shape, self._key_width = key_shape, key_width
        self._state_width = state_width
        self._entries, self._ways = entries, ways
        self._direct = key_width <= (entries - 1).bit_length()

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def ways(self) -> int:
        return self._ways

    @property
    def direct(self) -> bool:
        """Whether keys index the table directly (no tags, no drops)."""
        return self._direct

    @property
    def addressed(self) -> int:
        """Entries a key can reach: ``2**w`` direct, else all of them."""
        return (1 << self._key_width) if self._direct else self._entries

    @property
    def buckets(self) -> int:
        """Hashed, the buckets of ``ways`` entries; direct, one per entry a key addresses."""
        return self.addressed if self._direct else self._entries // self._ways

    @property
    def stamp_bits(self) -> int:
        """Bits of each entry's tick stamp (0 without timers)."""
        return self._stamp_bits

    @property
    def entry_layout(self) -> data.StructLayout:
        """One entry: valid, the key as tag (hashed only), the state vector, the tick stamp
        (with timers only)."""
        return data.StructLayout(
            {
                "valid": 1,
                "tag": 0 if self._direct else self._key_width,
                "state": self._state_width,
                "stamp": self._stamp_bits,
            }
        )

    @property
    def crc_parameters(self) -> crc.Parameters:
        """The bucket hash: CRC-32 over the key's ``ceil(w / 8)`` bytes as one word."""
        return crc.catalog.CRC32_ISO_HDLC(data_width=8 * ((self._key_width + 7) // 8))
