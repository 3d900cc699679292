-- Order-lifecycle violations in an e-commerce fulfilment log, per order.
-- ship_unpaid: an order is shipped although no payment was captured since it was created.
-- cancel_shipped: an order is cancelled (and maybe refunded) and the warehouse still picks,
--   packs and ships it: goods and money both lost.
-- double_refund: the same order is refunded twice: money paid out twice.
-- ato: payment and a change of shipping address right after each other (in either order),
--   then an express shipment worth 200.00 or more: the classic account-takeover fraud, where
--   the attacker redirects an expensive parcel. One alert per order (SKIP PAST LAST ROW).
--   What counts as expensive is a runtime parameter, :big (cents, compared with amount):
--   fraud teams move it while the stream runs, without building anything again. The data
--   are planted for --param big=20000 (queries/parameters.json).
-- All four queries share one engine: same stream, same partition key order_id.

CREATE STREAM orders (
    ts         UINT(32),
    order_id   UINT(32),
    status     ENUM('CREATED', 'PAID', 'ADDRESS_CHANGED', 'PICKED', 'PACKED', 'SHIPPED',
                    'DELIVERED', 'CANCELLED', 'REFUNDED'),
    amount     UINT(32),
    express    BOOL,
    warehouse  UINT(8)
);

QUERY ship_unpaid FROM orders
PARTITION order_id
PATTERN ( NEW (PICK | PACK | ADDR)* SHIP )
DEFINE
  NEW  AS (status = 'CREATED')
  PICK AS (status = 'PICKED')
  PACK AS (status = 'PACKED')
  ADDR AS (status = 'ADDRESS_CHANGED')
  SHIP AS (status = 'SHIPPED');

SELECT * FROM orders
MATCH_RECOGNIZE (
    PARTITION BY order_id
    ORDER BY ts
    AFTER MATCH REPORT EVERY END
    PATTERN (CANCEL REFUND? (PICK | PACK)* SHIP)
    DEFINE
        CANCEL AS status = 'CANCELLED',
        REFUND AS status = 'REFUNDED',
        PICK   AS status = 'PICKED',
        PACK   AS status = 'PACKED',
        SHIP   AS status = 'SHIPPED'
) AS cancel_shipped;

QUERY double_refund FROM orders
PARTITION order_id
PATTERN ( REFUND .* REFUND )
DEFINE
  REFUND AS (status = 'REFUNDED');

-- ANY is not defined: it is true for every tuple, as in SQL.
SELECT * FROM orders
MATCH_RECOGNIZE (
    PARTITION BY order_id
    ORDER BY ts
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (PERMUTE(PAY, ADDR) ANY* XSHIP)
    DEFINE
        PAY   AS status = 'PAID',
        ADDR  AS status = 'ADDRESS_CHANGED',
        XSHIP AS status = 'SHIPPED' AND express = TRUE AND amount >= :big
) AS ato;
