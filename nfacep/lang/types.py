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


FieldType = UIntType | IntType | BoolType | EnumType | Float32Type


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def is_integer(ty: FieldType) -> bool:
    return isinstance(ty, UIntType | IntType)
