-- Flink documentation, Table API & SQL > Queries > Pattern Recognition, "Controlling Memory
-- Consumption": the pattern fixed "by negating the condition for C" (B AS B.price <= 20).
--
-- The docs give only PATTERN and DEFINE. Changes nfacep needs, each one line:
-- * CREATE STREAM declares the Ticker table the docs assume registered.
-- * The statement around them is the page's usual one (PARTITION BY symbol ORDER BY rowtime,
--   ONE ROW PER MATCH, AFTER MATCH SKIP PAST LAST ROW, named MR) with the measure
--   LAST(C.rowtime) AS endTime (the page's After Match example has LAST(rowtime) AS endTime;
--   every match ends with C).
-- The docs give no rows: input.csv has two symbols, a price above 20 right after an A (a C
-- without a B: no match from that A), a price of exactly 20 (a B, not a C), a price too low
-- for any variable, and several possible As before one C.
-- conformance: same
CREATE STREAM Ticker (
    symbol ENUM('XYZ', 'ABC'),
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
            LAST(C.rowtime) AS endTime
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A B+ C)
        DEFINE
          A as A.price > 10,
          B as B.price <= 20,
          C as C.price > 20
    ) MR;
