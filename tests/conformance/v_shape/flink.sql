-- What benchmarks/flink_conformance.py runs on Flink for this example: query.sql with the
-- DEFINE clause as the docs write it (Flink refuses PREV: "Flink does not support physical
-- offsets within partition"). nfacep refuses LAST in a condition.
CREATE STREAM declares the Ticker table the docs assume registered (rowtime a TIMESTAMP).
-- * START_ROW.rowtime AS start_tstamp is written FIRST(START_ROW.rowtime): nfacep takes no
--   bare field in MEASURES; every match begins with START_ROW, so in SQL both are one row.
-- * LAST(PRICE_DOWN.rowtime) AS bottom_tstamp is left out: it is neither the match's first
--   nor its last row ("LAST(PRICE_DOWN.rowtime) ... may also end with PRICE_UP").
-- * AFTER MATCH SKIP TO LAST PRICE_UP is written SKIP PAST LAST ROW (SKIP TO is refused).
-- * LAST(PRICE_DOWN.price, 1) in DEFINE is written with PREV, as docs/language.md does: the
--   row before a PRICE_DOWN is START_ROW or the previous PRICE_DOWN, the one before PRICE_UP
--   the last PRICE_DOWN, so PREV(price) is the row the docs' condition reads.
--
-- Known difference (docs/language.md, "Where a match begins"): Flink's start_tstamp is the
-- START_ROW of the match its greedy PRICE_DOWN+ prefers (the earliest start, 10:00:04);
-- nfacep's FIRST is the latest start among the runs ending at the PRICE_UP (10:00:06, the
-- shortest V). The rows and end_tstamp agree.
-- conformance: differs start_tstamp
CREATE STREAM Ticker (
    symbol ENUM('ACME', 'BETA'),
    rowtime TIMESTAMP(MILLISECOND),
    price INT(64),
    tax INT(64)
);

SELECT *
FROM Ticker
    MATCH_RECOGNIZE (
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES
            FIRST(START_ROW.rowtime) AS start_tstamp,
            LAST(PRICE_UP.rowtime) AS end_tstamp
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (START_ROW PRICE_DOWN+ PRICE_UP)
        DEFINE
            PRICE_DOWN AS
                (LAST(PRICE_DOWN.price, 1) IS NULL AND PRICE_DOWN.price < START_ROW.price) OR
                    PRICE_DOWN.price < LAST(PRICE_DOWN.price, 1),
            PRICE_UP AS
                PRICE_UP.price > LAST(PRICE_DOWN.price, 1)
    ) MR;
