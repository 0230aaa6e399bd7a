#!/usr/bin/env bash
# Sets up what voucherd needs on a Debian machine, as root: PostgreSQL and
# Redis from Debian's packages where missing, each started where it does not
# answer on 127.0.0.1, and the role and databases the service and its tests
# use. With --with-chromium it also installs Chromium for the browser tests.
# Safe to run again: a step whose result is already there is only reported.
#
# Usage: scripts/setup.sh [--with-chromium]
set -euo pipefail

readonly PG_HOST=127.0.0.1 PG_PORT=5432
readonly REDIS_HOST=127.0.0.1 REDIS_PORT=6379
# A development role that logs in from localhost without a password (trust
# auth), so the service's and the Makefile's default URLs work as they are:
# postgres://voucher@127.0.0.1:5432/voucher?sslmode=disable
readonly DB_ROLE=voucher
readonly DATABASES=(voucher voucher_test)
readonly WAIT_TRIES=60 # half-second tries: 30 s for a service to answer

with_chromium=0
for arg in "$@"; do
	case "$arg" in
	--with-chromium) with_chromium=1 ;;
	-h | --help)
		sed -n '2,8s/^# \{0,1\}//p' "$0"
		exit 0
		;;
	*)
		echo "setup: unknown argument: $arg (try --help)" >&2
		exit 2
		;;
	esac
done

say() { printf 'setup: %s\n' "$*"; }
die() {
	printf 'setup: FAILED: %s\n' "$*" >&2
	exit 1
}
need_root() {
	[ "$(id -u)" -eq 0 ] || die "$1 needs root; run as root (or sudo $0)"
}

# --- packages -----------------------------------------------------------------

# The newest PostgreSQL server installed from Debian's packages, or nothing.
pg_server_version() {
	local v
	for v in $(ls /usr/lib/postgresql 2>/dev/null | sort -V -r); do
		if [ -x "/usr/lib/postgresql/$v/bin/postgres" ]; then
			echo "$v"
			return
		fi
	done
}

missing=()
if command -v pg_ctlcluster >/dev/null && command -v psql >/dev/null &&
	command -v pg_isready >/dev/null && [ -n "$(pg_server_version)" ]; then
	say "postgresql: installed ($(pg_server_version))"
else
	missing+=(postgresql)
fi
if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
	say "redis-server: installed"
else
	missing+=(redis-server)
fi
if [ "$with_chromium" -eq 1 ]; then
	if command -v chromium >/dev/null; then
		say "chromium: installed"
	else
		missing+=(chromium)
	fi
fi
if [ "${#missing[@]}" -gt 0 ]; then
	need_root "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	say "apt-get update"
	apt-get update -q >/dev/null
	say "apt-get install ${missing[*]}"
	# The lock timeout waits out an apt run that the machine itself started.
	apt-get install -y -q -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null
	say "installed ${missing[*]}"
fi

# --- PostgreSQL ---------------------------------------------------------------

pg_answers() { pg_isready -q -h "$PG_HOST" -p "$PG_PORT" -t 2; }

if pg_answers; then
	say "postgresql: answering on $PG_HOST:$PG_PORT"
else
	need_root "starting PostgreSQL"
	# Use the existing cluster named main, newest version first; on a fresh
	# install without one (the package makes it unless configured not to),
	# create it on the standard port.
	pg_version=""
	for v in $(ls /etc/postgresql 2>/dev/null | sort -V -r); do
		if [ -f "/etc/postgresql/$v/main/postgresql.conf" ]; then
			pg_version=$v
			break
		fi
	done
	if [ -z "$pg_version" ]; then
		pg_version=$(pg_server_version)
		[ -n "$pg_version" ] || die "no PostgreSQL server under /usr/lib/postgresql"
		say "postgresql: creating cluster $pg_version/main on port $PG_PORT"
		pg_createcluster -p "$PG_PORT" "$pg_version" main >/dev/null
	fi
	install -d -m 2775 -o postgres -g postgres /var/run/postgresql
	say "postgresql: starting cluster $pg_version/main"
	# A cluster that runs but does not answer here makes start fail; the wait
	# below then reports it with the log to read.
	pg_ctlcluster --skip-systemctl-redirect "$pg_version" main start ||
		say "postgresql: pg_ctlcluster start exited $? (waiting anyway)"
	for ((i = 0; i < WAIT_TRIES; i++)); do
		pg_answers && break
		sleep 0.5
	done
	pg_answers || die "PostgreSQL does not answer on $PG_HOST:$PG_PORT; see /var/log/postgresql/postgresql-$pg_version-main.log"
	say "postgresql: answering on $PG_HOST:$PG_PORT"
fi

# psql as a superuser: over TCP as postgres where that needs no password (trust,
# as on the development machines), else as the postgres OS user over the
# socket (peer auth, as on a fresh Debian install).
if psql -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -w -Atqc 'select 1' >/dev/null 2>&1; then
	pg_admin() { psql -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -w -v ON_ERROR_STOP=1 -Atq "$@"; }
else
	need_root "connecting to PostgreSQL as the postgres OS user"
	pg_admin() { (cd / && runuser -u postgres -- psql -p "$PG_PORT" -d postgres -v ON_ERROR_STOP=1 -Atq "$@"); }
	pg_admin -c 'select 1' >/dev/null || die "cannot connect to PostgreSQL as postgres (neither over TCP without a password nor over the socket)"
fi

if [ "$(pg_admin -c "select 1 from pg_roles where rolname = '$DB_ROLE'")" = 1 ]; then
	say "postgresql: role $DB_ROLE exists"
else
	say "postgresql: creating role $DB_ROLE"
	# CREATEDB lets a test harness make databases of its own.
	pg_admin -c "create role $DB_ROLE login createdb"
fi
for db in "${DATABASES[@]}"; do
	if [ "$(pg_admin -c "select 1 from pg_database where datname = '$db'")" = 1 ]; then
		say "postgresql: database $db exists"
	else
		say "postgresql: creating database $db owned by $DB_ROLE"
		pg_admin -c "create database $db owner $DB_ROLE"
	fi
done

# The check that matters: the role logs in over TCP with no password. Where
# it does not (a fresh install has scram-sha-256 for host connections), trust
# it from localhost with lines ahead of the others in pg_hba.conf (the first
# matching line wins), and reload.
role_connects() {
	env -u PGPASSWORD psql -h "$PG_HOST" -p "$PG_PORT" -U "$DB_ROLE" -d "$1" -w -Atqc 'select 1' >/dev/null 2>&1
}
roles_connect() {
	local db
	for db in "${DATABASES[@]}"; do role_connects "$db" || return 1; done
}
if ! roles_connect; then
	need_root "letting $DB_ROLE log in"
	say "postgresql: $DB_ROLE cannot log in without a password yet; granting LOGIN"
	pg_admin -c "alter role $DB_ROLE login"
	hba=$(pg_admin -c 'show hba_file')
	if ! grep -Eq "^[[:space:]]*host[[:space:]]+all[[:space:]]+$DB_ROLE[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust" "$hba"; then
		say "postgresql: trusting $DB_ROLE from localhost in $hba"
		tmp=$(mktemp)
		{
			echo "# voucherd development set-up (scripts/setup.sh): $DB_ROLE logs in from localhost without a password."
			echo "host all $DB_ROLE 127.0.0.1/32 trust"
			echo "host all $DB_ROLE ::1/128 trust"
			cat "$hba"
		} >"$tmp"
		cat "$tmp" >"$hba" # in place: the file keeps its owner and mode
		rm -f "$tmp"
	fi
	pg_admin -c 'select pg_reload_conf()' >/dev/null
	for ((i = 0; i < 10; i++)); do
		roles_connect && break
		sleep 0.5
	done
	roles_connect || die "role $DB_ROLE cannot log in to ${DATABASES[*]} on $PG_HOST:$PG_PORT without a password; check $hba"
fi
say "postgresql: $DB_ROLE logs in to ${DATABASES[*]} on $PG_HOST:$PG_PORT"

# --- Redis --------------------------------------------------------------------

redis_answers() { [ "$(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }

if redis_answers; then
	say "redis: answering on $REDIS_HOST:$REDIS_PORT"
else
	need_root "starting Redis"
	mkdir -p /var/lib/redis /var/log/redis
	say "redis: starting redis-server on $REDIS_HOST:$REDIS_PORT (nothing kept on disk)"
	redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" \
		--save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
	for ((i = 0; i < WAIT_TRIES; i++)); do
		redis_answers && break
		sleep 0.5
	done
	redis_answers || die "Redis does not answer on $REDIS_HOST:$REDIS_PORT; see /var/log/redis/ci.log"
	say "redis: answering on $REDIS_HOST:$REDIS_PORT"
fi

say "done"
