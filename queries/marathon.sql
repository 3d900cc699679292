-- Marathon cheating (the running example of Woods, Teubner and Alonso, VLDB 2010, section 2).
-- Runners must pass the checkpoints of the five boroughs in order: Staten Island (A), Brooklyn,
-- Queens (C), the Bronx (D) and Manhattan (E). A runner who reaches Queens, the Bronx or
-- Manhattan from the start without having passed the borough before it took a short cut
-- (subway, car) and should be disqualified before the results are published.

CREATE STREAM marathon (
    time        UINT(32),
    checkpoint  ENUM('Staten Island', 'Brooklyn', 'Queens', 'Bronx', 'Manhattan'),
    runner      UINT(16),
    speed       FLOAT32
);

QUERY cheat FROM marathon
PARTITION runner
PATTERN ( A NOTB* C | A NOTC* D | A NOTD* E )
DEFINE
  A    AS (checkpoint = 'Staten Island')
  NOTB AS (checkpoint != 'Brooklyn')
  C    AS (checkpoint = 'Queens')
  NOTC AS (checkpoint != 'Queens')
  D    AS (checkpoint = 'Bronx')
  NOTD AS (checkpoint != 'Bronx')
  E    AS (checkpoint = 'Manhattan');
