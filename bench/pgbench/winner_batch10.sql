-- Ten winners in one transaction, one UPDATE of the hot row by ten: what a
-- batching writer (or the Kafka consumer) can do.
\set c0 random(1, 1000000000000)
\set c1 random(1, 1000000000000)
\set c2 random(1, 1000000000000)
\set c3 random(1, 1000000000000)
\set c4 random(1, 1000000000000)
\set c5 random(1, 1000000000000)
\set c6 random(1, 1000000000000)
\set c7 random(1, 1000000000000)
\set c8 random(1, 1000000000000)
\set c9 random(1, 1000000000000)
BEGIN;
SELECT *, now()::timestamptz AS db_now FROM voucher WHERE code = 'hot';
INSERT INTO voucher_redemption (order_id, voucher_code, customer_id, order_amount, discount_amount, status, created_at, expires_at, position) VALUES ('o-' || :c0, 'hot', :c0, 25000, 1000, 'RESERVED', now(), now() + interval '15 min', 0),('o-' || :c1, 'hot', :c1, 25000, 1000, 'RESERVED', now(), now() + interval '15 min', 0),('o-' || :c2, 'hot', :c2, 25000, 1000, 'RESERVED', now(), now() + interval '15 min', 0),('o-' || :c3, 'hot', :c3, 25000, 1000, 'RESERVED', now(), now() + interval '15 min', 0),('o-' || :c4, 'hot', :c4, 25000, 1000, 'RESERVED', now(), now() + interval '15 min', 0),('o-' || :c5, 'hot', :c5, 25000, 1000, 'RESERVED', now(), now() + interval '15 min', 0),('o-' || :c6, 'hot', :c6, 25000, 1000, 'RESERVED', now(), now() + interval '15 min', 0),('o-' || :c7, 'hot', :c7, 25000, 1000, 'RESERVED', now(), now() + interval '15 min', 0),('o-' || :c8, 'hot', :c8, 25000, 1000, 'RESERVED', now(), now() + interval '15 min', 0),('o-' || :c9, 'hot', :c9, 25000, 1000, 'RESERVED', now(), now() + interval '15 min', 0) ON CONFLICT (order_id) DO NOTHING RETURNING order_id;
INSERT INTO voucher_customer AS vc (voucher_code, customer_id, used_count, use_limit) VALUES ('hot', :c0, 1, 1),('hot', :c1, 1, 1),('hot', :c2, 1, 1),('hot', :c3, 1, 1),('hot', :c4, 1, 1),('hot', :c5, 1, 1),('hot', :c6, 1, 1),('hot', :c7, 1, 1),('hot', :c8, 1, 1),('hot', :c9, 1, 1) ON CONFLICT (voucher_code, customer_id) DO UPDATE SET used_count = vc.used_count + 1 WHERE vc.used_count < vc.use_limit RETURNING used_count;
INSERT INTO reservation_event (order_id, voucher_code, customer_id, kind, path) VALUES ('o-' || :c0, 'hot', :c0, 'reserved', 'gate-sync'),('o-' || :c1, 'hot', :c1, 'reserved', 'gate-sync'),('o-' || :c2, 'hot', :c2, 'reserved', 'gate-sync'),('o-' || :c3, 'hot', :c3, 'reserved', 'gate-sync'),('o-' || :c4, 'hot', :c4, 'reserved', 'gate-sync'),('o-' || :c5, 'hot', :c5, 'reserved', 'gate-sync'),('o-' || :c6, 'hot', :c6, 'reserved', 'gate-sync'),('o-' || :c7, 'hot', :c7, 'reserved', 'gate-sync'),('o-' || :c8, 'hot', :c8, 'reserved', 'gate-sync'),('o-' || :c9, 'hot', :c9, 'reserved', 'gate-sync');
UPDATE voucher SET used_count = used_count + 10, reserved_count = reserved_count + 10 WHERE code = 'hot' AND used_count + 10 <= total_limit AND now() BETWEEN starts_at AND ends_at RETURNING used_count;
COMMIT;
