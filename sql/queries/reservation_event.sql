-- ReservationEventInsertMany records one kind of event for several orders
-- of any vouchers (codes[i] for order_ids[i]); a single change is a batch
-- of one.
-- name: ReservationEventInsertMany :exec
INSERT INTO reservation_event (order_id, voucher_code, customer_id, kind, path)
SELECT o.order_id, o.voucher_code, o.customer_id, sqlc.arg(kind), sqlc.arg(path)
FROM (SELECT unnest(sqlc.arg(order_ids)::text[]) AS order_id,
             unnest(sqlc.arg(codes)::text[]) AS voucher_code,
             unnest(sqlc.arg(customer_ids)::bigint[]) AS customer_id) AS o
ORDER BY o.order_id;

-- name: ReservationEventListByVoucher :many
SELECT * FROM reservation_event
WHERE voucher_code = $1
ORDER BY id DESC
LIMIT $2;
