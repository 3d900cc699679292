-- Flink documentation, Table API & SQL > Queries > Pattern Recognition,
-- "Defining a Pattern" > "Greedy & Reluctant Quantifiers": the query with a greedy B*.
--
-- Changes nfacep needs, each one line:
-- * CREATE STREAM declares the Ticker table the docs assume registered.
-- * C.price AS lastPrice is written LAST(C.price): nfacep takes no bare field in MEASURES;
--   every match ends with C, so in SQL both are the match's last row.
-- * The docs' statement has no name after MATCH_RECOGNIZE ( … ); nfacep names it "greedy".
--
-- Known difference (docs/language.md, "What a match is, and how it differs from SQL"): under
-- SKIP PAST LAST ROW Flink reports the match its greedy B* prefers (on the docs' rows: A 11,
-- B 12 13 14, C 16, lastPrice 16), nfacep the earliest end (A 11, B 12, C 13), then restarts
-- after it (A 14, C 16). nfacep's rows are Flink's for the reluctant B*? (../reluctant), which
-- the test checks too. Rows of ABC after the docs' rows: a match with an empty B*, and a C
-- that B could also take (14).
-- conformance: differs as reluctant
CREATE STREAM Ticker (
    symbol ENUM('XYZ', 'ABC'),
    tax INT(64),
    price INT(64),
    rowtime TIMESTAMP(MILLISECOND)
);

SELECT *
FROM Ticker
    MATCH_RECOGNIZE(
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES
            LAST(C.price) AS lastPrice
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A B* C)
        DEFINE
            A AS A.price > 10,
            B AS B.price < 15,
            C AS C.price > 12
    ) greedy;
