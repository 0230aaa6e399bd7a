-- +goose Up
-- Reservation.position (issue 29): a reservation's place among its
-- voucher's admitted reserves, 1 for the first use ever taken, fixed when
-- the use is taken and never reused. admitted_count is the voucher row's
-- count of them (a campaign's row for its codes: a campaign code's
-- reservation names it), only ever raised: a release gives its use back,
-- not its number. The writers number their rows from it under the row's
-- lock (internal/postgres/reserve.go); the kafka path's consumer stores the
-- number the gate gave and raises the count to at least it.
ALTER TABLE voucher ADD COLUMN admitted_count integer NOT NULL DEFAULT 0 CHECK (admitted_count >= 0);
ALTER TABLE voucher_redemption ADD COLUMN position integer;

-- The reservations made before are numbered in the order they were made.
UPDATE voucher_redemption r
SET position = n.position
FROM (SELECT order_id, row_number() OVER (PARTITION BY voucher_code ORDER BY created_at, order_id) AS position
      FROM voucher_redemption) AS n
WHERE r.order_id = n.order_id;
UPDATE voucher v
SET admitted_count = c.admitted
FROM (SELECT voucher_code, count(*) AS admitted FROM voucher_redemption GROUP BY voucher_code) AS c
WHERE v.code = c.voucher_code;

-- 0 only inside the transaction that writes the row: the row is claimed
-- before the voucher's row is locked (reserve's lock order), and numbered
-- by the statement that takes the use under that lock.
ALTER TABLE voucher_redemption ALTER COLUMN position SET NOT NULL;
ALTER TABLE voucher_redemption ADD CONSTRAINT voucher_redemption_position_check CHECK (position >= 0);

-- +goose Down
ALTER TABLE voucher_redemption DROP COLUMN position;
ALTER TABLE voucher DROP COLUMN admitted_count;
