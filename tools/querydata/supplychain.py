"""The data set of ``queries/supplychain.sql``, order lifecycle: ``supplychain.csv`` and
``supplychain.planted.csv``.
"""

from __future__ import annotations

import random

from .common import Event, write_dataset

ORDER_STATUSES = (
    "CREATED",
    "PAID",
    "ADDRESS_CHANGED",
    "PICKED",
    "PACKED",
    "SHIPPED",
    "DELIVERED",
    "CANCELLED",
    "REFUNDED",
)


ORDER_GAPS = dict(
    zip(
        ORDER_STATUSES,
        [  # seconds from a status to the next event, (lo, hi)
            (30, 900),
            (1800, 7200),
            (300, 1800),
            (600, 3600),
            (1200, 5400),
            (7200, 21600),
            (600, 3600),
            (300, 3600),
            (600, 7200),
        ],
        strict=True,
    )
)


class OrderLog:
    """The events of the fulfilment log; every random draw comes from ``rng``, in call order."""

    def __init__(self, rng, t0):
        self.rng = rng
        self.t0 = t0
        self.events = []
        self.ids = iter(rng.sample(range(4_100_000, 4_199_999), 80))

    def order(self, flow, start=None, end=None, express=None, amount=None, tags=None):
        """flow: statuses; tags: {index: [(query, kind)]}; start or end: first or last ts."""
        rng = self.rng
        oid = next(self.ids)
        express = rng.random() < 0.3 if express is None else express
        amount = rng.randrange(1500, 80_000, 5) if amount is None else amount
        wh = rng.randint(1, 4)
        gaps = [rng.randint(*ORDER_GAPS[s]) for s in flow[:-1]]
        if start is None:
            start = self.t0 + rng.randint(0, 6 * 3600) if end is None else end - sum(gaps)
        t = start
        for i, s in enumerate(flow):
            e = Event(
                oid,
                (t, oid, i),
                ts=t,
                order_id=oid,
                status=s,
                amount=amount,
                express=express,
                warehouse=wh,
            )
            for q, kind in (tags or {}).get(i, []):
                e.tag(q, kind)
            self.events.append(e)
            if i < len(flow) - 1:
                t += gaps[i]
        return oid


def _ordinary_orders(log):
    """ADDRESS_CHANGED only between PICKED and PACKED (never next to PAID), every shipment
    paid first, no shipment after a cancellation, at most one refund per order."""
    rng = log.rng
    C, P, A, PK, PA, S, D, X, R = ORDER_STATUSES
    for _ in range(38):
        kind = rng.choices(
            ["normal", "return", "cancel", "unpaid_cancel", "pending"], [60, 10, 10, 8, 12]
        )[0]
        if kind == "normal":
            flow = [C, P, PK] + ([A] if rng.random() < 0.2 else []) + [PA, S]
            flow += [D] if rng.random() < 0.85 else []
        elif kind == "return":
            flow = [C, P, PK, PA, S, D, R]
        elif kind == "cancel":
            flow = [C, P, X, R]
        elif kind == "unpaid_cancel":
            flow = [C, X]
        else:
            flow = [C, P] + ([PK] if rng.random() < 0.5 else [])
        log.order(flow)


def _planted_orders(log):
    """The planted matches and near-misses of the four queries; returns the second in which
    two different orders are each refunded once."""
    C, P, A, PK, PA, S, D, X, R = ORDER_STATUSES
    order, t0 = log.order, log.t0
    M, N = "match", "near_miss"
    SU, CS, DR, AT = "ship_unpaid", "cancel_shipped", "double_refund", "ato"
    # ship_unpaid
    order([C, PK, PA, S, D], express=False, tags={3: [(SU, M)]})
    order([C, A, PK, PA, S, D, P], express=False, tags={4: [(SU, M)]})  # invoiced, paid later
    order([C, S, D], express=False, tags={1: [(SU, M)]})  # drop-shipped by a vendor
    order([C, PK, PA, P, S, D], tags={4: [(SU, N)]})  # paid just before shipping
    order([PK, PA, S, D], start=t0 + 600, tags={2: [(SU, N)]})  # created before the log began
    # cancel_shipped
    order([C, P, PK, X, R, PA, S], tags={6: [(CS, M)]})
    order([C, P, PK, PA, X, S, D], tags={5: [(CS, M)]})  # no refund: REFUND? is optional
    order([C, P, PK, PA, S, X, R], tags={6: [(CS, N)]})  # cancelled only after shipping
    # refunded twice, then shipped: a double refund, and one REFUND too many for REFUND?
    order([C, P, PK, X, R, R, PA, S], tags={5: [(DR, M)], 7: [(CS, N)]})
    # double_refund
    order([C, P, X, R, R], tags={4: [(DR, M)]})
    order([C, P, PK, PA, S, D, R, R, R], tags={7: [(DR, M)], 8: [(DR, M)]})  # every end
    # two different orders refunded in the same second: one refund each, no match
    t_pair = t0 + 9 * 3600
    order([C, P, PK, PA, S, D, R], end=t_pair, tags={6: [(DR, N)]})
    order([C, P, PK, PA, S, D, R], end=t_pair, tags={6: [(DR, N)]})
    # ato
    order([C, P, A, PK, PA, S, D], express=True, amount=45_900, tags={5: [(AT, M)]})
    order([C, A, P, PK, PA, S], express=True, amount=31_250, tags={5: [(AT, M)]})
    order([C, P, A, PK, PA, S, D], express=False, amount=52_000, tags={5: [(AT, N)]})
    order([C, P, PK, A, PA, S, D], express=True, amount=61_000, tags={5: [(AT, N)]})
    order([C, P, A, PK, PA, S, D], express=True, amount=14_900, tags={5: [(AT, N)]})
    return t_pair


def gen_supplychain():
    rng = random.Random(4_100_017)
    log = OrderLog(rng, t0=1_718_870_400)  # epoch seconds
    _ordinary_orders(log)
    t_pair = _planted_orders(log)
    events_sorted, planted = write_dataset(
        "supplychain", ["ts", "order_id", "status", "amount", "express", "warehouse"], log.events
    )
    pair = [i for i, e in enumerate(events_sorted) if e["ts"] == t_pair]
    assert len(pair) == 2 and pair[1] == pair[0] + 1, "the two single refunds must be adjacent"
    return events_sorted, planted
