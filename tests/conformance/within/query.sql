-- Flink documentation, Table API & SQL > Queries > Pattern Recognition, "Defining a Pattern" >
-- "Time constraint": PATTERN (A B* C) WITHIN INTERVAL '1' HOUR on the docs' rows.
--
-- The docs' conditions compare with A's row (B AS B.price > A.price - 10, C AS C.price <
-- A.price - 10), which nfacep refuses ("'A.price' refers to another variable's row"), and so
-- is their measure A.price - C.price AS dropDiff (an expression). This example keeps the
-- docs' pattern, window, clauses and rows and gives A, B and C constant thresholds instead
-- (a price above 15, then prices above 10, then one below 10), the same text on both sides.
-- Other changes nfacep needs, each one line:
-- * CREATE STREAM declares the Ticker table the docs assume registered.
-- * C.rowtime AS dropTime is LAST(C.rowtime) (no bare field in MEASURES; a match ends with C).
-- * The docs' statement has no name after MATCH_RECOGNIZE ( … ); the query is named MR ("within" is a keyword in Flink).
--
-- The edges: on the docs' rows the drop to 9 at 11:40 comes exactly one hour after the 18 at
-- 10:40 (the latest A before it): a match takes less than the window, in Flink as in nfacep,
-- so it is not reported; the drop to 1 at 13:00 is 20 minutes after the 24. ABC: a drop 59
-- minutes after its A (reported) and one after two As (the later within the hour).
-- conformance: same
CREATE STREAM Ticker (
    symbol ENUM('ACME', 'ABC'),
    rowtime TIMESTAMP(MILLISECOND),
    price INT(64),
    tax INT(64)
);

SELECT *
FROM Ticker
    MATCH_RECOGNIZE(
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES
            LAST(C.rowtime) AS dropTime
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A B* C) WITHIN INTERVAL '1' HOUR
        DEFINE
            A AS A.price > 15,
            B AS B.price > 10,
            C AS C.price < 10
    ) MR;
