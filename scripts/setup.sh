#!/usr/bin/env bash
# Sets up what voucherd needs, and only what is missing: first the Go of
# go.mod's `go` line; then, for the PostgreSQL and Redis URLs the service and
# its tests use (DATABASE_URL, REDIS_URL; TEST_DATABASE_URL, TEST_REDIS_URL),
# nothing at all where they answer. Where one is unset (the local default)
# and does not answer, on a Debian machine, as root: PostgreSQL and Redis
# from Debian's packages, each started on 127.0.0.1, and the role and
# databases of the defaults. With --with-chromium it also installs Chromium
# for the browser tests. SETUP=skip skips everything but the Go check.
# Safe to run again: a step whose result is already there is only reported.
#
# Usage: scripts/setup.sh [--run] [--test] [--with-chromium]
#   --run   check DATABASE_URL and REDIS_URL (make run)
#   --test  check TEST_DATABASE_URL and TEST_REDIS_URL (make test)
#   neither: both pairs
set -euo pipefail

# The local place this script sets up; the ports are settable only so that
# scripts/setup_test.go can point it at servers of its own.
readonly PG_HOST=127.0.0.1 PG_PORT=${SETUP_PG_PORT:-5432}
readonly REDIS_HOST=127.0.0.1 REDIS_PORT=${SETUP_REDIS_PORT:-6379}
# A development role that logs in from localhost without a password (trust
# auth), so the service's and the Makefile's default URLs work as they are:
# postgres://voucher@127.0.0.1:5432/voucher?sslmode=disable
readonly DB_ROLE=voucher
readonly DATABASES=(voucher voucher_test)
readonly DEFAULT_DATABASE_URL="postgres://$DB_ROLE@$PG_HOST:$PG_PORT/voucher?sslmode=disable"
readonly DEFAULT_TEST_DATABASE_URL="postgres://$DB_ROLE@$PG_HOST:$PG_PORT/voucher_test?sslmode=disable"
readonly DEFAULT_REDIS_URL="redis://$REDIS_HOST:$REDIS_PORT/0"
readonly WAIT_TRIES=60 # half-second tries: 30 s for a service to answer
ROOT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly ROOT_DIR

with_chromium=0 for_run=0 for_test=0
for arg in "$@"; do
	case "$arg" in
	--with-chromium) with_chromium=1 ;;
	--run) for_run=1 ;;
	--test) for_test=1 ;;
	-h | --help)
		sed -n '2,15s/^# \{0,1\}//p' "$0"
		exit 0
		;;
	*)
		echo "setup: unknown argument: $arg (try --help)" >&2
		exit 2
		;;
	esac
done
if [ "$for_run" -eq 0 ] && [ "$for_test" -eq 0 ]; then
	for_run=1 for_test=1
fi

say() { printf 'setup: %s\n' "$*"; }
die() {
	printf 'setup: FAILED: %s\n' "$*" >&2
	exit 1
}
# need_root WHAT INSTEAD: without root, says what needed it and what to do
# instead, and stops.
need_root() {
	[ "$(id -u)" -eq 0 ] && return
	die "$1 needs root, and this is $(id -un 2>/dev/null || id -u). Run it as root (sudo bash scripts/setup.sh), or instead: $2. SETUP=skip skips this set-up."
}

# --- Go -------------------------------------------------------------------------

# The go line of go.mod is the oldest Go that builds this; an older one would
# fail later with compiler errors, so it is checked first. A go that is not on
# PATH is looked for where the official archive puts it.
go_needed=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' "$ROOT_DIR/go.mod")
[ -n "$go_needed" ] || die "go.mod has no go line"
go_help="get Go $go_needed or newer from https://go.dev/dl/ (Debian's golang-go package is older and cannot build this): tar -C /usr/local -xzf go$go_needed.linux-amd64.tar.gz, then PATH=\$PATH:/usr/local/go/bin"
go_bin=$(command -v go || true)
if [ -z "$go_bin" ] && [ -x /usr/local/go/bin/go ]; then
	go_bin=/usr/local/go/bin/go
fi
[ -n "$go_bin" ] || die "Go is not installed (no go on PATH or in /usr/local/go/bin); $go_help"
# In the module's directory, so a Go that switches toolchains (GOTOOLCHAIN)
# reports the one it would build with.
go_have=$(cd "$ROOT_DIR" && "$go_bin" env GOVERSION 2>/dev/null || true)
go_have=${go_have#go}
if [ -z "$go_have" ] || [ "$(printf '%s\n%s\n' "$go_needed" "$go_have" | sort -V | head -n 1)" != "$go_needed" ]; then
	die "$go_bin is Go ${go_have:-of an unknown version}; go.mod needs Go $go_needed or newer; $go_help"
fi
say "go: $go_have at $go_bin (go.mod needs $go_needed)"

if [ "${SETUP:-}" = skip ]; then
	say "SETUP=skip: PostgreSQL, Redis and Chromium not checked"
	exit 0
fi

# --- which services -----------------------------------------------------------

# The URLs to check, as NAME=URL: the caller's where set, else the default
# that the Makefile would use.
pg_urls=() redis_urls=()
if [ "$for_run" -eq 1 ]; then
	pg_urls+=("DATABASE_URL=${DATABASE_URL:-$DEFAULT_DATABASE_URL}")
	redis_urls+=("REDIS_URL=${REDIS_URL:-$DEFAULT_REDIS_URL}")
fi
if [ "$for_test" -eq 1 ]; then
	pg_urls+=("TEST_DATABASE_URL=${TEST_DATABASE_URL:-$DEFAULT_TEST_DATABASE_URL}")
	redis_urls+=("TEST_REDIS_URL=${TEST_REDIS_URL:-$DEFAULT_REDIS_URL}")
fi

# redact URL: the URL with its password starred, for messages.
redact() { printf '%s' "$1" | sed -E 's#(://[^:@/]*):[^@/]*@#\1:***@#'; }

# host_port URL DEFAULT_PORT prints "host port" of a postgres:// or redis://
# URL (the first host of a list).
host_port() {
	local rest=${1#*://} host port
	rest=${rest%%/*}
	rest=${rest%%\?*}
	rest=${rest##*@}
	rest=${rest%%,*}
	if [[ $rest == \[* ]]; then
		host=${rest%%]*}
		host=${host#[}
		port=${rest#*]}
		port=${port#:}
	else
		host=${rest%%:*}
		port=${rest#"$host"}
		port=${port#:}
	fi
	echo "${host:-$PG_HOST} ${port:-$2}"
}

# is_local HOST PORT LOCAL_PORT: the place this script can set up.
is_local() {
	case "$1" in 127.0.0.1 | localhost | ::1) [ "$2" = "$3" ] ;; *) return 1 ;; esac
}

tcp_answers() { timeout 3 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

# pg_check URL: logs in and runs select 1; on failure prints why. Without
# psql (nothing installed yet) it can only see whether the port answers.
pg_check() {
	local url=$1 out
	if command -v psql >/dev/null; then
		# pgx's own parameters (pool_max_conns, ...) are unknown to libpq.
		url=$(printf '%s' "$url" | sed -E 's/([?&])pool_[a-z_]+=[^&]*&?/\1/g; s/[?&]$//')
		if out=$(env -u PGPASSWORD psql "$url" -w -Atqc 'select 1' 2>&1 >/dev/null); then
			return 0
		fi
		printf '%s' "$out" | head -n 1 | sed -E 's/^psql: (error: )?//'
		return 1
	fi
	read -r host port <<<"$(host_port "$url" 5432)"
	if tcp_answers "$host" "$port"; then
		say "postgresql: $host:$port answers (no psql here to try the login; the service and the tests will)" >&2
		return 0
	fi
	echo "nothing answers on $host:$port"
	return 1
}

# redis_check URL: PING answers PONG; on failure prints why.
redis_check() {
	local url=$1 out host port
	read -r host port <<<"$(host_port "$url" 6379)"
	if command -v redis-cli >/dev/null && [[ $url == redis://* || $url == rediss://* ]]; then
		out=$(timeout 5 redis-cli -u "$url" --no-auth-warning ping 2>&1 || true)
		[ "$out" = PONG ] && return 0
		echo "${out:-no answer on $host:$port}" | head -n 1
		return 1
	fi
	if tcp_answers "$host" "$port"; then
		say "redis: $host:$port answers (no redis-cli here, or a cluster URL: the login is left to the service)" >&2
		return 0
	fi
	echo "nothing answers on $host:$port"
	return 1
}

# Each URL that answers is used as it is; one that does not is set up here
# only when it is the local place (127.0.0.1 on the standard port), else it
# is the caller's to fix.
pg_local=0 pg_failed=() pg_password=""
for entry in "${pg_urls[@]}"; do
	name=${entry%%=*} url=${entry#*=}
	if why=$(pg_check "$url"); then
		say "postgresql: $name answers ($(redact "$url"))"
		continue
	fi
	read -r host port <<<"$(host_port "$url" 5432)"
	if ! is_local "$host" "$port" "$PG_PORT"; then
		die "$name=$(redact "$url") does not answer: $why. Point $name at a PostgreSQL that answers, or unset it to let this script set up a local one."
	fi
	case "$why" in *password*) pg_password="$name: $why" ;; esac
	say "postgresql: $name does not answer yet ($why)"
	pg_local=1 pg_failed+=("$entry")
done
redis_local=0 redis_failed=()
for entry in "${redis_urls[@]}"; do
	name=${entry%%=*} url=${entry#*=}
	if why=$(redis_check "$url"); then
		say "redis: $name answers ($(redact "$url"))"
		continue
	fi
	read -r host port <<<"$(host_port "$url" 6379)"
	if ! is_local "$host" "$port" "$REDIS_PORT"; then
		die "$name=$(redact "$url") does not answer: $why. Point $name at a Redis that answers, or unset it to let this script start a local one."
	fi
	case "$why" in
	*NOAUTH* | *WRONGPASS* | *"invalid password"* | *"Authentication required"*)
		die "$name: Redis on $host:$port asks for a password ($why); it is not one this script started. Set $name to redis://:PASSWORD@$host:$port/0 (or a Redis of your own)."
		;;
	esac
	say "redis: $name does not answer yet ($why)"
	redis_local=1 redis_failed+=("$entry")
done

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
if [ "$pg_local" -eq 1 ]; then
	if command -v pg_ctlcluster >/dev/null && command -v psql >/dev/null &&
		command -v pg_isready >/dev/null && [ -n "$(pg_server_version)" ]; then
		say "postgresql: installed ($(pg_server_version))"
	else
		missing+=(postgresql)
	fi
fi
if [ "$redis_local" -eq 1 ]; then
	if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
		say "redis-server: installed"
	else
		missing+=(redis-server)
	fi
fi
if [ "$with_chromium" -eq 1 ]; then
	if command -v chromium >/dev/null; then
		say "chromium: installed"
	else
		missing+=(chromium)
	fi
fi
if [ "${#missing[@]}" -gt 0 ]; then
	command -v apt-get >/dev/null ||
		die "${missing[*]} missing and no apt-get here (this script knows Debian's packages): install ${missing[*]} yourself, or set DATABASE_URL, REDIS_URL (and TEST_DATABASE_URL, TEST_REDIS_URL for make test) to services that answer"
	need_root "installing ${missing[*]}" "apt-get install ${missing[*]} as root, or set the URLs (DATABASE_URL, REDIS_URL; TEST_DATABASE_URL, TEST_REDIS_URL) to services that answer"
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

# The message for a PostgreSQL on the local port that wants a password and
# that this script cannot administer (not root, or not a cluster of this
# machine's packages): not a dead end, the way out is the URL.
pg_password_help="PostgreSQL on $PG_HOST:$PG_PORT asks for a password (${pg_password:-}); it is not one this script set up. Set DATABASE_URL (make run) and TEST_DATABASE_URL (make test) to databases you may use, with the password: postgres://USER:PASSWORD@$PG_HOST:$PG_PORT/DBNAME?sslmode=disable (the role needs CREATEDB for the tests that make databases of their own)"

setup_postgres() {
	if pg_answers; then
		say "postgresql: answering on $PG_HOST:$PG_PORT"
	else
		need_root "starting PostgreSQL" "start a PostgreSQL on $PG_HOST:$PG_PORT yourself, or set DATABASE_URL and TEST_DATABASE_URL to one that answers"
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

	# psql as a superuser: over TCP as postgres where that needs no password
	# (trust, as on the development machines), else as the postgres OS user
	# over the socket (peer auth, as on a fresh Debian install).
	if psql -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -w -Atqc 'select 1' >/dev/null 2>&1; then
		pg_admin() { psql -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -w -v ON_ERROR_STOP=1 -Atq "$@"; }
	else
		[ -z "$pg_password" ] || [ "$(id -u)" -eq 0 ] || die "$pg_password_help"
		need_root "connecting to PostgreSQL as the postgres OS user (to create the role $DB_ROLE and its databases)" \
			"create them yourself (create role $DB_ROLE login createdb; create database voucher owner $DB_ROLE; create database voucher_test owner $DB_ROLE), or set DATABASE_URL and TEST_DATABASE_URL to databases you may use"
		pg_admin() { (cd / && runuser -u postgres -- psql -p "$PG_PORT" -d postgres -v ON_ERROR_STOP=1 -Atq "$@"); }
		if ! pg_admin -c 'select 1' >/dev/null 2>&1; then
			[ -z "$pg_password" ] || die "$pg_password_help"
			die "cannot connect to PostgreSQL as postgres (neither over TCP without a password nor over the socket)"
		fi
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

	# The check that matters: the role logs in over TCP with no password.
	# Where it does not (a fresh install has scram-sha-256 for host
	# connections), trust it from localhost with lines ahead of the others in
	# pg_hba.conf (the first matching line wins), and reload.
	role_connects() {
		env -u PGPASSWORD psql -h "$PG_HOST" -p "$PG_PORT" -U "$DB_ROLE" -d "$1" -w -Atqc 'select 1' >/dev/null 2>&1
	}
	roles_connect() {
		local db
		for db in "${DATABASES[@]}"; do role_connects "$db" || return 1; done
	}
	if ! roles_connect; then
		need_root "letting $DB_ROLE log in without a password" "set DATABASE_URL and TEST_DATABASE_URL with the role's password"
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
}

if [ "$pg_local" -eq 1 ]; then
	setup_postgres
	# A URL of the caller's on the local port (another database name, role
	# or password) must answer now too.
	for entry in "${pg_failed[@]}"; do
		name=${entry%%=*} url=${entry#*=}
		why=$(pg_check "$url") || die "$name=$(redact "$url") still does not answer: $why. Point $name at a database that answers, or unset it for the default ($DB_ROLE's voucher and voucher_test)."
		say "postgresql: $name answers"
	done
fi

# --- Redis --------------------------------------------------------------------

redis_answers() { [ "$(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]; }

if [ "$redis_local" -eq 1 ]; then
	if redis_answers; then
		say "redis: answering on $REDIS_HOST:$REDIS_PORT"
	else
		need_root "starting Redis" "start a Redis on $REDIS_HOST:$REDIS_PORT yourself (redis-server --port $REDIS_PORT --save '' --daemonize yes), or set REDIS_URL and TEST_REDIS_URL to one that answers"
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
	for entry in "${redis_failed[@]}"; do
		name=${entry%%=*} url=${entry#*=}
		why=$(redis_check "$url") || die "$name=$(redact "$url") still does not answer: $why"
		say "redis: $name answers"
	done
fi

say "done"
