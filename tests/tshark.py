"""The UDP link's captures read by Wireshark's ``tshark`` with the repository's dissector
(``links/udp/nfacep.lua``): every frame's IPv4 and UDP checksum status, the nfacep type and
the tuples and records each packet holds, and the frames Wireshark finds malformed or flags
with an error. ``tools/install-simulators.sh`` installs ``tshark`` (the Debian package); the
tests that need it skip without it."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
from collections.abc import Sequence

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DISSECTOR = ROOT / "links" / "udp" / "nfacep.lua"
FIELDS = (
    "frame.number",
    "ip.checksum.status",
    "udp.checksum.status",
    "nfacep.type",
    "nfacep.tuples",
    "nfacep.records",
)
#: Wireshark's checksum statuses
GOOD, NOT_PRESENT = "1", "3"
#: the UDP port the board's default is; other ports are found by the dissector's heuristic
PREFERENCES = (
    "ip.check_checksum:TRUE",
    "udp.check_checksum:TRUE",
    "udp.try_heuristic_first:TRUE",
)


def require_tshark() -> str:
    found = shutil.which("tshark")
    if found is None:
        pytest.skip(
            "tshark is not installed (the Debian package tshark; tools/install-simulators.sh)"
        )
    return found


def _tshark(pcap: pathlib.Path, *args: str) -> str:
    options = [a for p in PREFERENCES for a in ("-o", p)]
    done = subprocess.run(
        [require_tshark(), "-n", "-r", str(pcap), "-X", f"lua_script:{DISSECTOR}", *options, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    # a Lua error in the dissector shows as a malformed frame or on stderr
    assert "Lua" not in done.stderr, done.stderr
    return done.stdout


def dissect(pcap: pathlib.Path, fields: Sequence[str] = FIELDS) -> list[dict[str, str]]:
    """One row a frame: ``fields`` (:data:`FIELDS` unless told) as tshark prints them ('' where
    absent)."""
    out = _tshark(
        pcap, "-T", "fields", "-E", "separator=|", *(a for f in fields for a in ("-e", f))
    )
    return [dict(zip(fields, line.split("|"), strict=True)) for line in out.splitlines()]


def flagged(pcap: pathlib.Path) -> list[str]:
    """The frames (tshark's one-line summaries) Wireshark finds malformed or marks with an
    expert warning or error (a bad checksum, a malformed nfacep payload)."""
    return _tshark(pcap, "-Y", "_ws.malformed || _ws.expert.severity >= warning").splitlines()


def capture_counts(pcap: pathlib.Path) -> dict:
    """Checks a capture of the link and counts what it holds: no frame flagged, every IPv4
    header checksum good, every UDP checksum good or absent (the board sends none) and every
    UDP packet an nfacep one; the frames, the tuples in TUPLES packets, the records in RECORDS
    packets, the UDP checksums that were present (and good), and the rows (:func:`dissect`)."""
    assert flagged(pcap) == []
    rows = dissect(pcap)
    udp = [r for r in rows if r["udp.checksum.status"]]
    assert all(r["ip.checksum.status"] == GOOD for r in udp), udp
    assert all(r["udp.checksum.status"] in (GOOD, NOT_PRESENT) for r in udp), udp
    assert all(r["nfacep.type"] for r in udp), [r for r in udp if not r["nfacep.type"]]
    return {
        "frames": len(rows),
        "tuples": sum(int(r["nfacep.tuples"] or 0) for r in rows),
        "records": sum(int(r["nfacep.records"] or 0) for r in rows),
        "udp_checksums": sum(r["udp.checksum.status"] == GOOD for r in udp),
        "rows": rows,
    }
