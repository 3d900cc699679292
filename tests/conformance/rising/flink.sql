-- What benchmarks/flink_conformance.py runs on Flink for this example: the docs' statement,
-- its PATTERN, DEFINE and measures as the docs write them (Flink refuses PREV: "Flink does not
-- support physical offsets within partition"), named like query.sql's,
-- and AFTER MATCH SKIP PAST LAST ROW added as there.
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
            FIRST(A.price) AS startPrice,
            LAST(A.price) AS topPrice,
            B.price AS lastPrice
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A+ B)
        DEFINE
            A AS LAST(A.price, 1) IS NULL OR A.price > LAST(A.price, 1),
            B AS B.price < LAST(A.price)
    ) rising;
