-- One flash winner written as Store.Reserve writes it (gate-sync path):
-- read the voucher and the orderId, claim the orderId, count the customer,
-- append the audit event, take the use on the hot row last, commit.
\set c random(1, 1000000000000)
BEGIN;
SELECT *, now()::timestamptz AS db_now FROM voucher WHERE code = 'hot';
SELECT * FROM voucher_redemption WHERE order_id = 'o-' || :c;
INSERT INTO voucher_redemption (order_id, voucher_code, customer_id, order_amount, discount_amount, status, created_at, expires_at, position) VALUES ('o-' || :c, 'hot', :c, 25000, 1000, 'RESERVED', now(), now() + interval '15 min', 0) ON CONFLICT (order_id) DO NOTHING RETURNING *;
INSERT INTO voucher_customer AS vc (voucher_code, customer_id, used_count, use_limit) VALUES ('hot', :c, 1, 1) ON CONFLICT (voucher_code, customer_id) DO UPDATE SET used_count = vc.used_count + 1 WHERE vc.used_count < vc.use_limit RETURNING used_count;
INSERT INTO reservation_event (order_id, voucher_code, customer_id, kind, path) VALUES ('o-' || :c, 'hot', :c, 'reserved', 'gate-sync');
UPDATE voucher SET used_count = used_count + 1, reserved_count = reserved_count + 1 WHERE code = 'hot' AND used_count < total_limit AND now() BETWEEN starts_at AND ends_at RETURNING *;
COMMIT;
