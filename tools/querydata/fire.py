"""The data set of ``queries/fire.sql``, warehouse sensors (fire, freezer thaw): ``fire.csv`` and
``fire.planted.csv``.
"""

from __future__ import annotations

import random

from .common import Event, write_dataset

FIRE_ZONES = {  # sensor: zone, in the order the sensors are generated
    **dict.fromkeys((101, 102, 103, 104), "DOCK"),
    **dict.fromkeys((111, 112, 113, 114, 115, 116, 117), "AISLE"),
    **dict.fromkeys((121, 122), "OFFICE"),
    **dict.fromkeys((131, 132, 133), "FREEZER"),
}


FIRE_BASE = {"DOCK": 160, "AISLE": 205, "OFFICE": 218, "FREEZER": -182}  # tenths of a degC


def _fire_script():
    """Scripted readings of the fire sensors: sensor -> (first round, [(temp, smoke, co,
    tags[, shift])], silent afterwards). A reading ``None`` is one the sensor missed (its radio
    dropped it); ``shift`` moves a reading that many seconds off the minute grid."""
    return {**_fires(), **_fire_near_misses(), **_fire_window()}


def _fires():
    """The fires of :func:`_fire_script`."""
    F, T = False, True
    M = "match"
    return {
        # fire 1: three hot readings, then smoke on a hot reading; the sensor burns out
        103: (
            8,
            [
                (310, F, 9.5, []),
                (650, F, 14.0, []),
                (820, F, 31.0, []),
                (990, F, 58.0, []),
                (1100, T, 160.0, [("fire", M)]),
            ],
            True,
        ),
        # fire 2: four hot readings, then sprinklers cool it below 60.0 degC while CO rises
        112: (
            14,
            [
                (420, F, 12.0, []),
                (610, F, 35.0, []),
                (700, F, 52.0, []),
                (780, F, 80.0, []),
                (850, F, 120.0, []),
                (580, F, 350.0, [("fire", M)]),
            ],
            True,
        ),
        # fire 3: smoke on two consecutive hot readings: two ends, both reported (every end)
        114: (
            5,
            [
                (380, F, 10.0, []),
                (640, F, 22.0, []),
                (760, F, 40.0, []),
                (900, F, 75.0, []),
                (1050, T, 260.0, [("fire", M)]),
                (1180, T, 410.0, [("fire", M)]),
            ],
            True,
        ),
    }


def _fire_near_misses():
    """What :func:`_fire_script` plants that is not a fire: too few hot readings, heat alone,
    smoke alone."""
    F, T = False, True
    N = "near_miss"
    return {
        # near-miss: only two hot readings before the smoky (and hot) one
        121: (
            10,
            [
                (640, F, 6.0, []),
                (720, F, 9.0, []),
                (800, T, 30.0, [("fire", N)]),
                (260, F, 8.0, []),
            ],
            False,
        ),
        # near-miss: the hot run is broken by a 56.0 degC reading, only one hot reading before
        # smoke
        104: (
            12,
            [
                (700, F, 40.0, []),
                (750, F, 44.0, []),
                (560, F, 38.0, []),
                (690, F, 41.0, []),
                (300, T, 45.0, [("fire", N)]),
            ],
            False,
        ),
        # near-miss: heat without smoke (a truck idling under the sensor), CO stays below 200
        101: (
            16,
            [
                (620, F, 60.0, []),
                (680, F, 75.0, []),
                (700, F, 90.0, []),
                (640, F, 70.0, [("fire", N)]),
            ],
            False,
        ),
        # near-miss: smoke without heat (someone smoking at the dock)
        102: (6, [(240, T, 12.0, [("fire", N)])], False),
    }


def _fire_window():
    """The window (WITHIN 5 minutes = 300 s) to the second, on sensors that miss readings."""
    F, T = False, True
    M, N = "match", "near_miss"
    return {
        # fire 4: three hot readings, the fire knocks out the radio for two readings, and the
        # next one, 299 s after the first hot one, shows smoke: it fits; the sensor burns out
        116: (
            9,
            [
                (240, F, 5.0, []),
                (620, F, 18.0, []),
                (710, F, 30.0, []),
                (790, F, 55.0, []),
                None,
                None,
                (930, T, 240.0, [("fire", M)], -1),
            ],
            True,
        ),
        # near-miss: a welder heats the sensor for three readings, its radio drops the next
        # two, and the next one, exactly 300 s after the first hot one, shows the welding
        # fumes: one second too late for the window (without WITHIN it would be a match)
        117: (
            17,
            [
                (230, F, 4.0, []),
                (650, F, 20.0, []),
                (730, F, 35.0, []),
                (700, F, 40.0, []),
                None,
                None,
                (260, T, 90.0, [("fire", N)]),
            ],
            False,
        ),
    }


def _freezer(first, co, temps, tags):
    """A freezer's script: ``temps`` from round ``first`` on, no smoke, constant CO;
    ``tags``: {index in temps: kind of the planted thaw instance}."""
    return (
        first,
        [(t, False, co, [("thaw", tags[i])] if i in tags else []) for i, t in enumerate(temps)],
        False,
    )


def _thaw_script():
    """Scripted readings of the freezers, as :func:`_fire_script`."""
    M, N = "match", "near_miss"
    return {
        # thaw: compressor failure; the fourth warm reading is the alert; the fifth is not
        # reported (SKIP PAST LAST ROW; every-end would report it); then repaired
        131: _freezer(
            6,
            1.0,
            [-172, -158, -140, -110, -75, -48, -30, -12, 5, 18, 30, -20, -90, -160, -178],
            {8: M, 9: N},
        ),
        # thaw twice: the second episode starts from a fresh frozen reading after the first
        # alert
        132: _freezer(
            2,
            0.5,
            [
                -120,
                -70,
                -40,
                -20,
                -5,
                10,
                -60,
                -130,
                -170,
                -182,
                -185,
                -140,
                -90,
                -45,
                -25,
                -10,
                0,
                -80,
                -160,
            ],
            {5: M, 16: M},
        ),
        # near-miss: a defrost cycle, only three warm readings (-60 is below -5.0 degC)
        133: _freezer(9, 0.8, [-120, -60, -40, -30, -20, -90, -150, -175], {5: N}),
    }


def _fire_background(rng, zone, base):
    """An unscripted reading of a sensor in ``zone`` whose usual temperature is ``base``."""
    temp = base + rng.randint(-8, 8)
    co = round(rng.uniform(2.0, 45.0) if zone == "DOCK" else rng.uniform(0.0, 8.0), 1)
    if zone == "FREEZER":  # drawn after the value above, which it replaces
        co = round(rng.uniform(0.0, 2.0), 1)
    return temp, False, co, []


def gen_fire():
    rng = random.Random(451)
    t0 = 1_718_000_000  # epoch seconds
    rounds, period = 24, 60
    base = {s: FIRE_BASE[z] + rng.randint(-15, 15) for s, z in FIRE_ZONES.items()}
    script = {**_fire_script(), **_thaw_script()}
    events = []
    for s, zone in FIRE_ZONES.items():
        offset = rng.randrange(period)
        first, readings, silent = script.get(s, (rounds, [], False))
        for r in range(rounds):
            ts = t0 + r * period + offset
            if first <= r < first + len(readings):
                if readings[r - first] is None:  # a missed reading
                    continue
                temp, smoke, co, tags, *shift = readings[r - first]
                ts += shift[0] if shift else 0
            elif silent and r >= first + len(readings):
                continue
            else:
                temp, smoke, co, tags = _fire_background(rng, zone, base[s])
            e = Event(
                s, (ts, s), ts=ts, sensor=s, zone=zone, temp=temp, smoke=smoke, co_ppm=f"{co:.1f}"
            )
            for q, kind in tags:
                e.tag(q, kind)
            events.append(e)
    return write_dataset("fire", ["ts", "sensor", "zone", "temp", "smoke", "co_ppm"], events)
