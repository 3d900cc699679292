"""The data set of ``queries/vshape.sql``, stock ticks: ``vshape.csv`` and
``vshape.planted.csv``.
"""

from __future__ import annotations

import random

from .common import Event, write_dataset

VSHAPE_STOCKS = {  # id: (ticker, open, previous close), prices in cents
    1: ("AAPL", 18950, 18890),
    2: ("MSFT", 41520, 41380),
    3: ("NVDA", 87340, 88010),
    4: ("XOM", 11870, 11920),
    5: ("JPM", 19840, 19790),
    6: ("KO", 6215, 6230),
}


VSHAPE_CONDITIONS = ("REGULAR", "ODD_LOT", "OFF_EXCHANGE")  # of the scripted ticks


def _vshape_script():
    """Scripted ticks: stock -> list of (first index, [(price - open, volume, cond, tag)]);
    volume None means a random regular-way volume below the script's concern."""
    return {**_vshape_recoveries(), **_vshape_false_recoveries()}


def _vshape_recoveries():
    """The stocks of :func:`_vshape_script` that dip and recover (a W: once only)."""
    R = VSHAPE_CONDITIONS[0]
    M, N = "match", "near_miss"
    return {
        # recovery exactly at open - 20
        1: [
            (
                14,
                [
                    (30, None, R, None),
                    (-80, None, R, None),
                    (-190, None, R, None),
                    (-320, 2400, R, None),
                    (-410, 3100, R, None),
                    (-260, None, R, None),
                    (-120, None, R, None),
                    (-20, None, R, M),
                ],
            )
        ],
        2: [
            (
                8,
                [
                    (10, None, R, None),
                    (-150, None, R, None),
                    (-350, 1800, R, None),
                    (-280, None, R, None),
                    (-60, None, R, None),
                    (5, None, R, M),
                ],
            ),
            (
                30,
                [
                    (40, None, R, None),
                    (-120, None, R, None),
                    (-301, 900, R, None),  # boundary
                    (-200, None, R, None),
                    (-30, None, R, None),
                    (-10, None, R, M),
                ],
            ),
        ],
        # a W whose middle peak is one tick: the first V is reported at it, the second V would
        # need that tick again as its start, which SKIP PAST LAST ROW forbids
        3: [
            (
                20,
                [
                    (60, None, R, None),
                    (-200, None, R, None),
                    (-520, 4000, R, None),
                    (-380, 2600, R, None),
                    (-90, None, R, None),
                    (15, None, R, M),
                    (-150, None, R, None),
                    (-450, 3500, R, None),
                    (-600, 5200, R, None),
                    (-240, None, R, None),
                    (25, None, R, N),
                ],
            )
        ],
    }


def _vshape_false_recoveries():
    """The stocks of :func:`_vshape_script` that look like a V and are not one."""
    R, OL, OX = VSHAPE_CONDITIONS
    N = "near_miss"
    return {
        # deep prints, but none counts: odd lots, a 300-share print, an off-exchange print
        4: [
            (
                25,
                [
                    (20, None, R, None),
                    (-110, None, R, None),
                    (-330, 40, OL, None),
                    (-360, 300, R, None),
                    (-410, 6000, OX, None),
                    (-340, 75, OL, None),
                    (-150, None, R, None),
                    (-5, None, R, N),
                ],
            )
        ],
        # deep dip, recovery stalls at open - 21 and never gets back for the rest of the day
        5: [
            (
                28,
                [
                    (10, None, R, None),
                    (-140, None, R, None),
                    (-380, 2100, R, None),
                    (-250, None, R, None),
                    (-90, None, R, None),
                    (-21, None, R, N),
                ],
            )
        ],
        # the low is exactly open - 300: not below it, so no BOTTOM
        6: [
            (
                18,
                [
                    (15, None, R, None),
                    (-90, None, R, None),
                    (-210, None, R, None),
                    (-300, 3000, R, None),
                    (-180, None, R, None),
                    (-40, None, R, None),
                    (10, None, R, N),
                ],
            )
        ],
    }


def _vshape_background(rng, i, n, opn, price, hi):
    """An unscripted tick ``i`` of ``n``: (price, volume, condition); ``price`` is the last
    one, ``hi`` the highest the price may reach."""
    R, OL, OX = VSHAPE_CONDITIONS
    if i == 0:
        return opn, rng.randrange(20_000, 60_000, 100), "OPENING"
    step = round(rng.gauss(0, max(opn * 0.0012, 6)))
    price = min(max(price + step, opn - 250), hi)
    if i == n - 1:
        return price, rng.randrange(30_000, 90_000, 100), "CLOSING"
    cond = rng.choices([R, OL, OX], [85, 10, 5])[0]
    vol = {  # every volume is drawn, whichever the condition
        R: rng.randrange(100, 2500, 100),
        OL: rng.randint(1, 99),
        OX: rng.randrange(100, 8000, 100),
    }[cond]
    return price, vol, cond


def gen_vshape():
    rng = random.Random(1987_1019)
    t_open, t_close = 34_200_000, 57_600_000  # 09:30 and 16:00, milliseconds since midnight
    n = 50
    script = _vshape_script()
    events = []
    for sid, (_ticker, opn, prev_close) in VSHAPE_STOCKS.items():
        fixed = {
            first + k: tick for first, ticks in script.get(sid, []) for k, tick in enumerate(ticks)
        }
        after_stall = min(
            (i for i, tk in fixed.items() if sid == 5 and tk[3] == "near_miss"), default=None
        )
        price = opn
        for i in range(n):
            ts = (
                t_close
                if i == n - 1
                else t_open + i * 468_000 + (rng.randint(1, 60_000) if i else 0)
            )
            if i in fixed:
                off, vol, cond, tag = fixed[i]
                price = opn + off
                if vol is None:
                    vol = rng.randrange(100, 2500, 100)
            else:
                tag = None
                # JPM stays below the recovery line after its stall until the close
                stalled = after_stall is not None and i > after_stall
                hi = opn - 21 if stalled else opn + 400
                price, vol, cond = _vshape_background(rng, i, n, opn, price, hi)
            e = Event(
                sid,
                (ts, sid),
                ts=ts,
                stock=sid,
                price=price,
                open=opn,
                volume=vol,
                cond=cond,
                chg=price - prev_close,
            )
            if tag:
                e.tag("vshape", tag)
            events.append(e)
    return write_dataset(
        "vshape", ["ts", "stock", "price", "open", "volume", "cond", "chg"], events
    )
