-- name: ReservationEventInsert :exec
INSERT INTO reservation_event (order_id, voucher_code, customer_id, kind, path)
VALUES ($1, $2, $3, $4, $5);

-- name: ReservationEventListByVoucher :many
SELECT * FROM reservation_event
WHERE voucher_code = $1
ORDER BY id DESC
LIMIT $2;
