#!/usr/bin/env bash
# The hot row of a flash sale's winners, measured with pgbench on a scratch
# database: the reserve transaction of internal/postgres (Store.Reserve, the
# sqlc queries of sql/queries) as the server sends it, and variants of it.
# See docs/benchmarks.md, "The database write of winners".
#
# Usage: bench/pgbench/run.sh SCRATCH_DATABASE_URL [seconds]
#   The database is emptied and given the schema of migrations/00001; never
#   point it at a database you want to keep. Create one first, e.g.
#   sudo -u postgres createdb -O voucher flashbench_scratch
set -euo pipefail
url=${1:?usage: $0 SCRATCH_DATABASE_URL [seconds]}
secs=${2:-8}
here=$(cd "$(dirname "$0")" && pwd)
pgbench=$(command -v pgbench || ls /usr/lib/postgresql/*/bin/pgbench | sort -V | tail -1)

q() { psql -q -v ON_ERROR_STOP=1 "$url" "$@" 2>&1 | grep -v NOTICE || true; }

q -c 'DROP TABLE IF EXISTS reservation_event, voucher_redemption, voucher_customer, voucher CASCADE' \
	-c 'DROP FUNCTION IF EXISTS reservation_event_append_only() CASCADE'
sed -n '/+goose Up/,/+goose Down/p' "$here/../../migrations/00001_vouchers.sql" | grep -v '+goose' | q

# reset FK: an empty table, one hot voucher with uses for any run, and the
# foreign keys to it as given ("" = as in the migration, "none" = dropped).
reset() {
	q -c 'ALTER TABLE voucher_redemption DROP CONSTRAINT IF EXISTS voucher_redemption_voucher_code_fkey' \
		-c 'ALTER TABLE voucher_customer DROP CONSTRAINT IF EXISTS voucher_customer_voucher_code_fkey' \
		-c 'TRUNCATE voucher_redemption, voucher_customer, reservation_event' \
		-c 'DELETE FROM voucher' \
		-c "INSERT INTO voucher (code, discount_amount, total_limit, starts_at, ends_at, flash) VALUES ('hot', 1000, 100000000, now() - interval '1 hour', now() + interval '1 day', true)" \
		-c 'VACUUM ANALYZE voucher'
	if [ "$1" != none ]; then
		q -c "ALTER TABLE voucher_redemption ADD CONSTRAINT voucher_redemption_voucher_code_fkey FOREIGN KEY (voucher_code) REFERENCES voucher (code) ON UPDATE CASCADE $1" \
			-c "ALTER TABLE voucher_customer ADD CONSTRAINT voucher_customer_voucher_code_fkey FOREIGN KEY (voucher_code) REFERENCES voucher (code) ON UPDATE CASCADE $1"
	fi
}

# run NAME SCRIPT CLIENTS WINNERS_PER_TRANSACTION
run() {
	local out tps
	out=$("$pgbench" -n -M prepared -c "$3" -j 2 -T "$secs" -f "$here/$2" "$url" 2>&1)
	tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
	printf '%-34s %3s clients  %8.0f transactions/s  %8.0f winners/s  %s\n' "$1" "$3" "$tps" "$(awk -v t="$tps" -v n="$4" 'BEGIN { print t * n }')" \
		"$(grep 'latency average' <<<"$out")"
}

for c in 4 16 64; do
	reset "";                              run "as is (FKs checked at insert)" winner.sql "$c" 1
	reset "DEFERRABLE INITIALLY DEFERRED"; run "FKs deferred to commit" winner.sql "$c" 1
	reset none;                            run "no FKs to voucher" winner.sql "$c" 1
done
reset "";                              run "as is, hot row first" winner_hotfirst.sql 16 1
reset "";                              run "10 winners a transaction" winner_batch10.sql 4 10
reset "";                              run "10 winners a transaction" winner_batch10.sql 16 10
reset "DEFERRABLE INITIALLY DEFERRED"; run "10 a transaction, FKs deferred" winner_batch10.sql 4 10
