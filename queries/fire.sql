-- Warehouse fire and freezer-failure detection over one stream of building sensors.
-- fire: three or more consecutive readings of at least 60.0 degC at one sensor followed by
--   smoke (the optical detector, or carbon monoxide of 200 ppm and more), all within five
--   minutes (the first hot reading less than 300 s before the smoky one). Heat alone (a truck
--   idling at the dock) or smoke alone (someone smoking) must not raise the alarm; the
--   sequence of both at one sensor is a real fire and must reach the fire brigade at once.
--   Sensors report about once a minute, so the window matters when a sensor misses readings:
--   heat and smoke five minutes or more apart are not taken for one fire.
-- thaw: a freezer that was frozen (below -15.0 degC) warms up and stays between -5.0 and
--   40.0 degC for four consecutive readings: its compressor has failed and the stock is
--   spoiling. One alert per thaw episode (AFTER MATCH SKIP PAST LAST ROW), not one per reading.
-- Temperatures are INT(16) tenths of a degree Celsius, so freezers report negative values.
-- ts counts seconds since the Unix epoch; TIME(SECOND) says so, which lets fire give its
-- window as an interval.

CREATE STREAM warehouse (
    ts      UINT(32) TIME(SECOND),
    sensor  UINT(16),
    zone    ENUM('DOCK', 'AISLE', 'OFFICE', 'FREEZER'),
    temp    INT(16),
    smoke   BOOL,
    co_ppm  FLOAT32
);

QUERY fire FROM warehouse
PARTITION sensor
ORDER BY ts
PATTERN ( HOT{3,} SMOKE ) WITHIN INTERVAL '5' MINUTE
DEFINE
  HOT   AS (temp >= 600)
  SMOKE AS (smoke = TRUE OR co_ppm >= 200.0);

SELECT * FROM warehouse
MATCH_RECOGNIZE (
    PARTITION BY sensor
    ORDER BY ts
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (FROZEN THAWING* WARM{4})
    DEFINE
        FROZEN  AS zone = 'FREEZER' AND temp < -150,
        THAWING AS temp >= -150,
        WARM    AS temp BETWEEN -50 AND 400
) AS thaw;
