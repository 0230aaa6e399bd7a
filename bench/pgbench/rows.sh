#!/usr/bin/env bash
# What one flash winner's rows cost PostgreSQL, piece by piece: the Kafka
# consumer's batch (internal/postgres/events.go, ApplyReservedBatch: the
# reservation rows, the customers' counts, the events, the hot row's count)
# written by one session in batches of 330, on the schema of every migration,
# then again without a piece at a time. One backend on an otherwise idle
# machine, so the wall time per winner is about its CPU time.
#
# Usage: bench/pgbench/rows.sh SCRATCH_DATABASE_URL [batches]
#   The database is dropped and made again (its name from the URL, on the
#   same server, by the postgres superuser); never point it at one you want
#   to keep, e.g. postgres://voucher@127.0.0.1:5432/winner_rows_scratch
set -euo pipefail
url=${1:?usage: $0 SCRATCH_DATABASE_URL [batches]}
batches=${2:-300}
here=$(cd "$(dirname "$0")" && pwd)
name=${url##*/}
name=${name%%\?*}
admin=${url%/*}/postgres
owner=$(echo "$url" | sed -E 's#^postgres(ql)?://([^:@/]+).*#\2#')
# as_admin runs psql on the server's postgres database as the postgres
# superuser, else as the URL's user.
as_admin() { psql -q "$admin" -U postgres "$@" >/dev/null 2>&1 || psql -q "$admin" "$@" >/dev/null; }
as_admin -c "DROP DATABASE IF EXISTS $name WITH (FORCE)" -c "CREATE DATABASE $name OWNER $owner"
(cd "$here/../.." && DATABASE_URL=$url go run ./cmd/voucherd migrate >/dev/null 2>&1)

q() { psql -qAt -v ON_ERROR_STOP=1 "$url" "$@"; }

# One batch of 330 winners, :b its number (new orders and customers).
batch=$(mktemp)
trap 'rm -f "$batch" "$batch.noev" "$batch.all"' EXIT
cat >"$batch" <<'SQL'
BEGIN;
INSERT INTO voucher_redemption (order_id, voucher_code, customer_id, order_amount, discount_amount, status, created_at, expires_at)
SELECT 'o' || :b || '-' || g, 'BIG', :b * 1000 + g, 5000, 100, 'RESERVED', now(), now() + interval '15 min'
FROM generate_series(1, 330) g ORDER BY 1 ON CONFLICT (order_id) DO NOTHING;
INSERT INTO voucher_customer AS vc (voucher_code, customer_id, used_count, use_limit)
SELECT 'BIG', :b * 1000 + g, 1, (SELECT per_user_limit FROM voucher WHERE code = 'BIG')
FROM generate_series(1, 330) g ORDER BY 2
ON CONFLICT (voucher_code, customer_id) DO UPDATE SET used_count = vc.used_count + excluded.used_count;
INSERT INTO reservation_event (order_id, voucher_code, customer_id, kind, path)
SELECT 'o' || :b || '-' || g, 'BIG', :b * 1000 + g, 'reserved', 'kafka' FROM generate_series(1, 330) g ORDER BY 1;
UPDATE voucher SET used_count = used_count + 330, reserved_count = reserved_count + 330 WHERE code = 'BIG';
COMMIT;
SQL
# The same batch without the events.
sed '/^INSERT INTO reservation_event/d' "$batch" >"$batch.noev"

run() { # label [no-events]
	q -c "TRUNCATE voucher_redemption, voucher_customer, reservation_event CASCADE" \
		-c "DELETE FROM voucher WHERE code = 'BIG'" \
		-c "INSERT INTO voucher (code, discount_amount, total_limit, starts_at, ends_at, flash, currency) VALUES ('BIG', 100, 100000000, now(), now() + interval '1 day', true, 'USD')" >/dev/null
	local file=$batch
	[ "${2:-}" = no-events ] && file=$batch.noev
	for b in $(seq 1 "$batches"); do
		printf '\\set b %d\n\\i %s\n' "$b" "$file"
	done >"$batch.all"
	local start end
	start=$(date +%s%N)
	q -f "$batch.all" >/dev/null
	end=$(date +%s%N)
	awk -v l="$1" -v ns=$((end - start)) -v n=$((batches * 330)) 'BEGIN { printf "%-62s %6.1f us a winner\n", l, ns / 1000 / n }'
}

run "as migrated"
q -c "ALTER TABLE voucher_redemption DROP CONSTRAINT voucher_redemption_voucher_code_fkey" \
	-c "ALTER TABLE voucher_customer DROP CONSTRAINT voucher_customer_voucher_code_fkey"
run "without the two foreign keys to voucher"
run "... and without the reservation_event row" no-events
q -c "DROP INDEX voucher_redemption_voucher_idx"
run "without the foreign keys and voucher_redemption_voucher_idx"
q -c "DROP INDEX voucher_redemption_due_idx"
run "... and without voucher_redemption_due_idx"
as_admin -c "DROP DATABASE IF EXISTS $name WITH (FORCE)"
