#!/usr/bin/env bash
# A cross-check of flashbench with wrk (issue 12): the HTTP+JSON ceiling, the
# seed's sale over REST and the same over GraphQL, each on a fresh 1,000-use
# flash voucher, the load from wrk in its own process (2 threads, 256
# connections, a fresh customer and orderId per request). Prints wrk's line
# for each and the voucher's counts afterwards (sold exactly 1,000).
#
# Usage: bench/wrk/run.sh DATABASE_URL REDIS_URL [seconds]
#   A database of its own (the sale leaves its reservations behind), e.g.
#   createdb -h 127.0.0.1 -U voucher voucher_wrk
set -euo pipefail
db=${1:?usage: $0 DATABASE_URL REDIS_URL [seconds]}
redis=${2:?usage: $0 DATABASE_URL REDIS_URL [seconds]}
secs=${3:-10}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
command -v wrk >/dev/null || { echo "wrk is not installed (Debian: apt-get install wrk)" >&2; exit 1; }

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

(cd "$root" && go build -o "$tmp/voucherd" ./cmd/voucherd && go build -o "$tmp/flashbench" ./cmd/flashbench)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() { for _ in $(seq 100); do curl -fs -o /dev/null "$1" && return 0; sleep 0.1; done; echo "$1 never answered" >&2; exit 1; }

storefront=wrk-storefront-token admin=wrk-admin-token
port=$(free_port)
DATABASE_URL=$db REDIS_URL=$redis HTTP_ADDR=127.0.0.1:$port STOREFRONT_TOKENS=$storefront ADMIN_TOKENS=$admin LOG_LEVEL=warn \
	"$tmp/voucherd" serve >"$tmp/voucherd.log" 2>&1 &
pids+=($!)
base=http://127.0.0.1:$port
wait_for "$base/readyz"

cport=$(free_port)
"$tmp/flashbench" ceiling -addr "127.0.0.1:$cport" >"$tmp/ceiling.log" 2>&1 &
pids+=($!)
sleep 0.5

gql() { # token query: prints the JSON answer
	curl -fsS -H "Authorization: Bearer $1" -H 'Content-Type: application/json' "$base/graphql" \
		-d "$(python3 -c 'import json,sys; print(json.dumps({"query": sys.argv[1]}))' "$2")"
}
voucher() { # code: a 1,000-use flash voucher, live now
	local from to
	from=$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ) to=$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)
	gql "$admin" "mutation { createVoucher(input: {code: \"$1\", discountAmount: 1000, totalLimit: 1000, perUserLimit: 1, startsAt: \"$from\", endsAt: \"$to\", flash: true}) { voucher { code } error { code message } } }" >/dev/null
}
counts() { gql "$storefront" "{ voucher(code: \"$1\") { usedCount remaining gateRemaining } }"; echo; }

run=$(date +%s)
wrk -t2 -c256 -d"${secs}s" -s "$here/sale.lua" "http://127.0.0.1:$cport" -- ceiling WRK-CEILING "$storefront" | grep '^wrk '
for mode in rest graphql; do
	code=WRK-$run-$mode
	voucher "$code"
	sleep 1 # the warm-up job loads the gate
	wrk -t2 -c256 -d"${secs}s" -s "$here/sale.lua" "$base" -- "$mode" "$code" "$storefront" | grep '^wrk '
	echo "  $code after the sale: $(counts "$code")"
done
