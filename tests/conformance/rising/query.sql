-- Flink documentation, Table API & SQL > Queries > Pattern Recognition, "Output Mode": a
-- rising run of prices (A+) ended by a lower one (B).
--
-- Changes nfacep needs, each one line:
-- * CREATE STREAM declares the Ticker table the docs assume registered.
-- * The DEFINE clause uses PREV instead of LAST(A.price, 1) and LAST(A.price) (nfacep refuses
--   LAST in a condition, and IS NULL; Flink refuses PREV: flink.sql keeps the docs' text),
--   so A+ is written A UP*: the docs' first A holds on any row (its LAST(A.price, 1) IS NULL),
--   nfacep's A has no DEFINE; each later A is above the A before it, the row before it, which
--   is UP's PREV(price); B is below the last A, the row before it.
-- * FIRST(A.price) AS startPrice stays (a match begins with its A); B.price AS lastPrice is
--   LAST(B.price) (no bare field in MEASURES; a match ends with its B).
-- * LAST(A.price) AS topPrice is left out: the last A is neither the match's first row nor
--   its last ("LAST(A.price) is accepted only where every match ends with a tuple of A, but a
--   match may end with B").
-- * AFTER MATCH SKIP PAST LAST ROW is added (to flink.sql too): the docs leave the clause out,
--   and Flink's default is then SKIP TO NEXT ROW, which nfacep refuses (run without it, Flink
--   prints a row for every start: 10, 12 and 13 on the docs' rows, where the docs show only
--   the first); nfacep's SQL form defaults to SKIP PAST LAST ROW, the SQL standard's default.
-- * The docs' statement has no name after MATCH_RECOGNIZE ( … ); nfacep names it "rising".
--
-- Known difference, by design (docs/language.md, "Where a match begins"): Flink's startPrice is
-- the first row of the match starting earliest (on the docs' rows 10, of 10 12 13 11); nfacep's
-- FIRST is the latest start among the runs ending at B: A on the row before B (13), since A
-- holds on any row. The ends, and so lastPrice, agree: from any start, the match ends at the
-- first fall. nfacep.csv holds nfacep's rows.
-- Rows of ABC after the docs' rows: its first row (no row before it: PREV is NULL, so neither
-- UP nor B), a tie (20 20: not a rise, not a fall) and two falls in a row.
-- conformance: differs
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
            LAST(B.price) AS lastPrice
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A UP* B)
        DEFINE
            UP AS UP.price > PREV(UP.price),
            B AS B.price < PREV(B.price)
    ) rising;
