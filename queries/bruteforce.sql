-- Intrusion detection over a network and authentication event log, per source IPv4 address
-- (src_ip holds the address as a 32-bit integer, e.g. 3405803777 = 203.0.113.1).
-- bruteforce: five or more consecutive failed logins followed by a successful one, all within
--   one minute (the first failure less than 60 s before the success): a password was guessed
--   by a tool, the account is compromised and must be locked now. A person who mistypes five
--   times over several minutes is not a brute force.
-- portscan: eight consecutive connection attempts (SYN) to ports other than the web ports:
--   reconnaissance before an attack. With AFTER MATCH SKIP PAST LAST ROW a long scan raises
--   one alert per eight probes instead of one per probe.
-- Both queries read the same stream with the same partition key, so they share one engine.
-- ts counts milliseconds since midnight; TIME(MILLISECOND) says so, which lets bruteforce give
-- its window as an interval.

CREATE STREAM netlog (
    ts        UINT(32) TIME(MILLISECOND),
    src_ip    UINT(32),
    event     ENUM('SYN', 'HTTP_GET', 'LOGIN_FAIL', 'LOGIN_OK', 'LOGOUT'),
    dst_port  UINT(16),
    bytes     UINT(32)
);

QUERY bruteforce FROM netlog
PARTITION src_ip
ORDER BY ts
PATTERN ( FAIL{5,} OK ) WITHIN INTERVAL '1' MINUTE
DEFINE
  FAIL AS (event = 'LOGIN_FAIL')
  OK   AS (event = 'LOGIN_OK');

SELECT * FROM netlog
MATCH_RECOGNIZE (
    PARTITION BY src_ip
    ORDER BY ts
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (PROBE{8})
    DEFINE
        PROBE AS event = 'SYN' AND NOT (dst_port IN (80, 443, 8080))
) AS portscan;
