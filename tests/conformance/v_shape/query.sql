-- Flink documentation, Table API & SQL > Queries > Pattern Recognition,
-- "Introduction and Examples" > "Examples": periods of a constantly decreasing price.
--
-- Changes nfacep needs, each one line:
-- * CREATE STREAM declares the Ticker table the docs assume registered (rowtime a TIMESTAMP).
-- * START_ROW.rowtime AS start_tstamp is written FIRST(START_ROW.rowtime): nfacep takes no
--   bare field in MEASURES; every match begins with START_ROW, so in SQL both are one row.
-- * LAST(PRICE_DOWN.rowtime) AS bottom_tstamp is left out: it is neither the match's first
--   nor its last row ("LAST(PRICE_DOWN.rowtime) ... may also end with PRICE_UP").
-- * AFTER MATCH SKIP TO LAST PRICE_UP is written SKIP PAST LAST ROW (SKIP TO is refused).
-- * LAST(PRICE_DOWN.price, 1) in DEFINE is written with PREV, as docs/language.md does (nfacep
--   refuses LAST in a condition, Flink refuses PREV: flink.sql keeps the docs' DEFINE). For
--   PRICE_DOWN the row before it is START_ROW or the previous PRICE_DOWN, the rows the docs'
--   condition reads; for PRICE_UP see the second difference below.
--
-- Known differences (nfacep.csv holds nfacep's rows):
-- * By design (docs/language.md, "Where a match begins"): Flink's start_tstamp is the
--   START_ROW of the match its greedy PRICE_DOWN+ prefers (the earliest start, 10:00:04);
--   nfacep's FIRST is the latest start among the runs ending at the PRICE_UP (10:00:06, the
--   shortest V). end_tstamp agrees.
-- * Of the rewrite: in PRICE_UP's condition the docs' LAST(PRICE_DOWN.price, 1) is the
--   PRICE_DOWN *before* the last one (offset 1 counts back from the last row mapped), NULL
--   when PRICE_DOWN+ took one row, so Flink reports no V with a single fall (BETA 19, 18,
--   22 at 10:00:03-05); PREV(price) is the last PRICE_DOWN, and nfacep reports that V.
-- BETA's 17, 17, 18 at the end is a tie (17 is not below 17): no V on either side.
-- conformance: differs
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
                PRICE_DOWN.price < PREV(PRICE_DOWN.price),
            PRICE_UP AS
                PRICE_UP.price > PREV(PRICE_UP.price)
    ) MR;
