"""Field types of a stream declaration, with their value ranges and bit widths."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "INTERVAL_UNITS",
    "TIME_UNITS",
    "BoolType",
    "EnumType",
    "FieldType",
    "Float32Type",
    "IntType",
    "Ipv4Type",
    "TimestampType",
    "UIntType",
]

#: The units a field's values may be declared in (``ts UINT(32) TIME(MILLISECOND)``), with
#: their length in nanoseconds; ``WITHIN INTERVAL 'n' unit`` takes the last five.
TIME_UNITS = {
    "NANOSECOND": 1,
    "MICROSECOND": 1_000,
    "MILLISECOND": 1_000_000,
    "SECOND": 10**9,
    "MINUTE": 60 * 10**9,
    "HOUR": 3600 * 10**9,
    "DAY": 86400 * 10**9,
}
INTERVAL_UNITS = ("MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY")


@dataclass(frozen=True, slots=True)
class UIntType:
    width: int

    @property
    def bits(self) -> int:
        return self.width

    @property
    def range(self) -> tuple[int, int]:
        return 0, (1 << self.width) - 1

    def __str__(self) -> str:
        return f"UINT({self.width})"


@dataclass(frozen=True, slots=True)
class IntType:
    width: int

    @property
    def bits(self) -> int:
        return self.width

    @property
    def range(self) -> tuple[int, int]:
        return -(1 << (self.width - 1)), (1 << (self.width - 1)) - 1

    def __str__(self) -> str:
        return f"INT({self.width})"


@dataclass(frozen=True, slots=True)
class BoolType:
    @property
    def bits(self) -> int:
        return 1

    def __str__(self) -> str:
        return "BOOL"


@dataclass(frozen=True, slots=True)
class EnumType:
    labels: tuple[str, ...]

    @property
    def bits(self) -> int:
        """The fewest bits that hold every label's index (at least one)."""
        return max(1, (len(self.labels) - 1).bit_length())

    @property
    def range(self) -> tuple[int, int]:
        return 0, len(self.labels) - 1

    def __str__(self) -> str:
        return "ENUM(" + ", ".join(_quote(label) for label in self.labels) + ")"


@dataclass(frozen=True, slots=True)
class Float32Type:
    @property
    def bits(self) -> int:
        return 32

    def __str__(self) -> str:
        return "FLOAT32"


@dataclass(frozen=True, slots=True)
class Ipv4Type(UIntType):
    """An IPv4 address: 32 bits, the first octet the most significant (``10.1.2.3`` is
    0x0A010203); stored, packed and sent as a ``UINT(32)`` is, written as a dotted quad.
    It compares with ``=`` and ``<>`` and is tested against networks with ``IN``."""

    width: int = 32

    def __str__(self) -> str:
        return "IPV4"


@dataclass(frozen=True, slots=True)
class TimestampType(IntType):
    """A point in time: a signed 64-bit count of ``unit`` since 1970-01-01 00:00:00 UTC,
    stored, packed and compared as an ``INT(64)`` is; written as ISO 8601 text."""

    unit: str = "MICROSECOND"
    width: int = 64

    def __str__(self) -> str:
        return f"TIMESTAMP({self.unit})"


FieldType = UIntType | IntType | BoolType | EnumType | Float32Type


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def is_integer(ty: FieldType) -> bool:
    """A UINT or INT field: one that takes part in arithmetic (not IPV4 nor TIMESTAMP)."""
    return isinstance(ty, UIntType | IntType) and not isinstance(ty, Ipv4Type | TimestampType)
