-- Flink documentation, Table API & SQL > Queries > Pattern Recognition,
-- "Defining a Pattern" > "Greedy & Reluctant Quantifiers": the same query with B*? (reluctant).
--
-- Changes nfacep needs, each one line:
-- * CREATE STREAM declares the Ticker table the docs assume registered.
-- * C.price AS lastPrice is written LAST(C.price): nfacep takes no bare field in MEASURES;
--   every match ends with C, so in SQL both are the match's last row.
-- * The docs' statement has no name after MATCH_RECOGNIZE ( … ); nfacep names it "reluctant".
--
-- nfacep reports the same rows as Flink (a reluctant quantifier changes no end nfacep reports).
-- conformance: same
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
        PATTERN (A B*? C)
        DEFINE
            A AS A.price > 10,
            B AS B.price < 15,
            C AS C.price > 12
    ) reluctant;
