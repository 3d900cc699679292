-- Flink documentation, Table API & SQL > Queries > Pattern Recognition, "Controlling Memory
-- Consumption": the pattern fixed "by using the reluctant quantifier" (A B+? C, B undefined).
--
-- The docs give only PATTERN and DEFINE. Changes nfacep needs, each one line:
-- * CREATE STREAM declares the Ticker table the docs assume registered.
-- * The statement around them is the page's usual one (PARTITION BY symbol ORDER BY rowtime,
--   ONE ROW PER MATCH, AFTER MATCH SKIP PAST LAST ROW, named MR) with the measure
--   LAST(C.rowtime) AS endTime (the page's After Match example has LAST(rowtime) AS endTime;
--   every match ends with C).
-- The docs give no rows: input.csv (memory_negated's) has two symbols, a price above 20
-- right after an A, which B+? may take as a B (B has no condition), a price of exactly 20,
-- and several possible As before one C.
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
        PATTERN (A B+? C)
        DEFINE
          A as A.price > 10,
          C as C.price > 20
    ) MR;
