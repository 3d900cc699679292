-- Intraday V-shaped recovery per instrument: from at (or above) the day's opening price the
-- stock falls, trades more than 3.00 below the open on a real print (a regular-way or closing
-- trade of at least 500 shares, not an odd lot or an off-exchange print), and climbs back to
-- within 0.20 of the open. Traders watch for it as a sign of capitulation and strong buying
-- interest. Prices are UINT(32) cents; chg (price minus the previous close) is INT(32).
-- AFTER MATCH SKIP PAST LAST ROW: a V ends at its recovery tick, and the next V must start
-- after it (the right leg of one V is not reused as the left leg of the next).

CREATE STREAM ticks (
    ts      UINT(32),
    stock   UINT(16),
    price   UINT(32),
    open    UINT(32),
    volume  UINT(32),
    cond    ENUM('REGULAR', 'ODD_LOT', 'OPENING', 'CLOSING', 'OFF_EXCHANGE'),
    chg     INT(32)
);

SELECT * FROM ticks
MATCH_RECOGNIZE (
    PARTITION BY stock
    ORDER BY ts
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (TOP DOWN* BOTTOM+ DOWN* TOP)
    DEFINE
        TOP    AS price >= open - 20,
        DOWN   AS price < open - 20,
        BOTTOM AS price + 300 < open AND volume >= 500 AND cond IN ('REGULAR', 'CLOSING')
) AS vshape;
