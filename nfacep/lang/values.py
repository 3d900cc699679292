"""Exact conversions shared by literals in queries and values in tuple files."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is loaded when a FLOAT32 value is converted, not to parse a query
    from collections.abc import Sequence

    import numpy as np

__all__ = [
    "IPV4_TEXT",
    "TIMESTAMP_TEXT",
    "TIMESTAMP_UNITS",
    "decimal_to_float32",
    "fix_float32_rounding",
    "float32_key",
    "format_ipv4",
    "format_timestamp",
    "parse_ipv4",
    "parse_network",
    "parse_timestamp",
]


def decimal_to_float32(text: str) -> np.float32:
    """The float32 nearest to the decimal ``text`` (ties to even), without double rounding."""
    import numpy as np

    return fix_float32_rounding(np.array([text]), np.array([float(text)]))[0]


def fix_float32_rounding(texts: Sequence[str] | np.ndarray, doubles: np.ndarray) -> np.ndarray:
    """Round ``doubles`` (each the correctly rounded double of ``texts``) to float32 exactly.

    Rounding a decimal first to double and then to single is wrong only when the double lands
    exactly on a midpoint between two singles; those rare values are redone from the text.
    """
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):
        singles = doubles.astype(np.float32)
        finite = np.isfinite(singles) & np.isfinite(doubles)
        up = np.nextafter(singles, np.float32(np.inf))
        down = np.nextafter(singles, np.float32(-np.inf))
        other = np.where(doubles.astype(np.float64) > singles.astype(np.float64), up, down)
        mid = (singles.astype(np.float64) + other.astype(np.float64)) / 2
        ties = finite & (doubles == mid) & (singles != other)
    for i in np.flatnonzero(ties):
        # via Decimal: Fraction(str) reads the digits with int(), which refuses more than
        # 4300 of them
        exact = Fraction(Decimal(str(texts[int(i)]).strip()))
        if exact == Fraction(float(doubles[i])):
            continue  # a true tie: ties-to-even as numpy already did
        above = exact > Fraction(float(doubles[i]))
        lo, hi = sorted((float(singles[i]), float(other[i])))
        singles[i] = np.float32(hi if above else lo)
    return singles


# --- IPV4 -------------------------------------------------------------------------------------

#: An IPv4 address as files and literals write it: four decimal octets, no leading zeros.
OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
IPV4_TEXT = rf"{OCTET}\.{OCTET}\.{OCTET}\.{OCTET}"


def parse_ipv4(text: str) -> int | None:
    """The 32-bit value of a dotted quad (``10.1.2.3`` is 0x0A010203), or None when ``text``
    is not exactly one (four decimal octets 0..255 without leading zeros)."""
    import re

    if not re.fullmatch(IPV4_TEXT, text):
        return None
    a, b, c, d = (int(part) for part in text.split("."))
    return a << 24 | b << 16 | c << 8 | d


def parse_network(text: str) -> tuple[int, int]:
    """``(address, prefix length)`` of ``a.b.c.d/n`` (or of an address alone: its /32);
    ValueError saying why otherwise, host bits set included."""
    address, slash, length = text.partition("/")
    value = parse_ipv4(address)
    if value is None:
        raise ValueError("is not an IPv4 address (four decimal octets 0..255, as 10.1.2.3)")
    if not slash:
        return value, 32
    if not length.isascii() or not length.isdigit() or len(length) > 2 or int(length) > 32:
        raise ValueError("has no prefix length from 0 to 32 after '/'")
    prefix = int(length)
    host = (1 << (32 - prefix)) - 1
    if value & host:
        network = format_ipv4(value & ~host & 0xFFFF_FFFF)
        raise ValueError(f"has host bits set: the network is '{network}/{prefix}'")
    return value, prefix


def format_ipv4(value: int) -> str:
    """The dotted quad of a 32-bit value."""
    return ".".join(str(value >> shift & 0xFF) for shift in (24, 16, 8, 0))


# --- TIMESTAMP --------------------------------------------------------------------------------

#: ISO 8601 as files and literals write a time: a date, then optionally ``T`` or a space, the
#: time of day (seconds and a fraction of up to 9 digits optional), and ``Z`` or an offset.
TIMESTAMP_TEXT = (
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})"
    r"(?:[Tt ](?P<hour>[0-9]{2}):(?P<minute>[0-9]{2})"
    r"(?::(?P<second>[0-9]{2})(?:[.,](?P<fraction>[0-9]{1,9}))?)?"
    r"(?P<zone>[Zz]|(?P<sign>[+-])(?P<zh>[0-9]{2}):?(?P<zm>[0-9]{2}))?)?"
)
#: nanoseconds in one unit of a TIMESTAMP
TIMESTAMP_UNITS = {"SECOND": 10**9, "MILLISECOND": 10**6, "MICROSECOND": 10**3, "NANOSECOND": 1}


def days_from_civil(year, month, day):
    """Days from 1970-01-01 to a proleptic Gregorian date (Hinnant's algorithm); works on
    Python ints and on numpy int64 arrays alike."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    mp = (month + 9) % 12
    doy = (153 * mp + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """The date ``days`` after 1970-01-01, as (year, month, day)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def days_in_month(year, month):
    """The days of a month (1..12) of a proleptic Gregorian year (ints or numpy arrays)."""
    return days_from_civil(year + (month == 12), month % 12 + 1, 1) - days_from_civil(
        year, month, 1
    )


def parse_timestamp(text: str, unit: str) -> int:
    """The count of ``unit`` since 1970-01-01 00:00:00 UTC of an ISO 8601 time (a time without
    a zone is UTC; an offset is subtracted); ValueError saying why otherwise (not ISO 8601, a
    day or time that does not exist, finer than ``unit``, beyond a signed 64-bit count)."""
    import re

    m = re.fullmatch(TIMESTAMP_TEXT, text)
    if m is None:
        raise ValueError("is not an ISO 8601 time (YYYY-MM-DD[ HH:MM[:SS[.fraction]]][Z|+HH:MM])")
    g = {k: int(v) for k, v in m.groupdict().items() if v and k not in ("zone", "sign", "fraction")}
    year, month, day = g["year"], g["month"], g["day"]
    hour, minute, second = g.get("hour", 0), g.get("minute", 0), g.get("second", 0)
    zone = g.get("zh", 0) * 60 + g.get("zm", 0)
    if not (1 <= month <= 12 and 1 <= day <= days_in_month(year, month)):
        raise ValueError("is not a day of the calendar")
    if hour > 23 or minute > 59 or second > 59 or g.get("zh", 0) > 23 or g.get("zm", 0) > 59:
        raise ValueError("is not a time of day (00:00:00 to 23:59:59, offsets to 23:59)")
    if m["sign"] == "-":
        zone = -zone
    seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    ns = (seconds - zone * 60) * 10**9 + int((m["fraction"] or "").ljust(9, "0"))
    value, rest = divmod(ns, TIMESTAMP_UNITS[unit])
    if rest:
        raise ValueError(f"is finer than a {unit.lower()}, the unit of TIMESTAMP({unit})")
    if not -(1 << 63) <= value < 1 << 63:
        raise ValueError(f"is beyond a signed 64-bit count of {unit.lower()}s since 1970")
    return value


def format_timestamp(value: int, unit: str) -> str:
    """ISO 8601 text of a count of ``unit`` since the epoch, in UTC: ``2024-01-01T00:00:00Z``
    with as many fraction digits as the unit has (none, 3, 6 or 9)."""
    per = TIMESTAMP_UNITS[unit]
    digits = {10**9: 0, 10**6: 3, 10**3: 6, 1: 9}[per]
    seconds, part = divmod(value * per, 10**9)
    days, second = divmod(seconds, 86400)
    year, month, day = civil_from_days(days)
    hour, second = divmod(second, 3600)
    minute, second = divmod(second, 60)
    fraction = f".{part // per:0{digits}d}" if digits else ""
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}{fraction}Z"


def float32_key(value: float) -> int | None:
    """The unsigned 32-bit order key of a float32 as the decoder computes it, or None for NaN.

    Non-NaN floats compare (``=``, ``<``, …) exactly as their keys do: positive floats map to
    ``bits | 2**31``, negative ones to ``~bits``, and -0 to the key of +0.
    """
    import struct

    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    if bits & FLOAT32_MAGNITUDE > FLOAT32_INF:
        return None
    if bits & FLOAT32_SIGN and bits & FLOAT32_MAGNITUDE:
        return ~bits & 0xFFFF_FFFF
    return (bits & FLOAT32_MAGNITUDE) | FLOAT32_SIGN


FLOAT32_SIGN = 1 << 31
FLOAT32_MAGNITUDE = FLOAT32_SIGN - 1
FLOAT32_INF = 0x7F80_0000  #: +infinity's bits; a magnitude above is a NaN
