-- Flink documentation, Table API & SQL > Queries > Pattern Recognition, the page's first
-- example ("The following example illustrates the syntax for basic pattern recognition").
--
-- Changes nfacep needs, each one line:
-- * CREATE STREAM declares MyTable (the docs give no schema; these are the fields it uses).
-- * SELECT T.aid, T.bid, T.cid is SELECT *: nfacep's select list must be * (Flink's * is the
--   partition column, then the measures).
-- * A.id AS aid is FIRST(A.id), C.id AS cid is LAST(C.id): nfacep takes no bare field in
--   MEASURES; a match begins with its A and ends with its C, so in SQL they are those rows.
-- * B.id AS bid is left out: B is neither the match's first nor its last row
--   ("FIRST(B.id) ... may also begin with A" when written FIRST; B.id alone is refused).
-- * ORDER BY proctime is ORDER BY rowtime: nfacep has no processing time, and event time
--   makes Flink's order the input's, so the two read the same rows in the same order.
-- The docs give no rows: input.csv has three users interleaved, ties of rowtime across users,
-- an 'a' 'b' broken by another name, and a user whose pattern overlaps itself (a b a b c).
-- conformance: same
CREATE STREAM MyTable (
    userid UINT(32),
    rowtime TIMESTAMP(MILLISECOND),
    id UINT(32),
    name ENUM('a', 'b', 'c', 'd')
);

SELECT *
FROM MyTable
    MATCH_RECOGNIZE (
      PARTITION BY userid
      ORDER BY rowtime
      MEASURES
        FIRST(A.id) AS aid,
        LAST(C.id) AS cid
      PATTERN (A B C)
      DEFINE
        A AS name = 'a',
        B AS name = 'b',
        C AS name = 'c'
    ) AS T;
