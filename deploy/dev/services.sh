#!/usr/bin/env bash
# Postgres and Redis for local development and tests.
#
#   eval "$(deploy/dev/services.sh env)"    # better: out=$(deploy/dev/services.sh env) && eval "$out"
#   deploy/dev/services.sh createdb NAME    # create database NAME on the chosen Postgres if missing
#   deploy/dev/services.sh stop             # stop the throwaway instances this script started (.run/)
#   deploy/dev/services.sh status           # say what would be used, start nothing
#   deploy/dev/services.sh ensure-cc        # install what go test needs beside the services when missing:
#                                           # gcc (-race needs cgo) and pgbouncer (tests behind a pooler)
#
# `env` prints `export DATABASE_URL=... REDIS_URL=...` on stdout; every diagnostic goes to stderr.
# Choice, for each of Postgres and Redis:
#   1. DATABASE_URL / REDIS_URL when set, as they are;
#   2. else Postgres on 127.0.0.1:5432 (user postgres, no password) / Redis on 127.0.0.1:6379 when it answers;
#   3. else a throwaway instance started from the installed binaries, with its data in .run/
#      (Postgres on 127.0.0.1:55432, Redis on 127.0.0.1:56379), installing Debian's `postgresql` /
#      `redis-server` when missing. A running throwaway instance is reused; it stays up until `stop`.
#
# Knobs (environment):
#   HOOKWHEEL_FORCE_LOCAL_SERVICES=1   skip step 2 (do not probe 5432/6379)
#   HOOKWHEEL_PG_PORT=55432            port of the throwaway Postgres
#   HOOKWHEEL_REDIS_PORT=56379         port of the throwaway Redis
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RUN_DIR="$ROOT/.run"
PG_PORT="${HOOKWHEEL_PG_PORT:-55432}"
REDIS_PORT="${HOOKWHEEL_REDIS_PORT:-56379}"
FORCE_LOCAL="${HOOKWHEEL_FORCE_LOCAL_SERVICES:-0}"
REDIS_DIR="$RUN_DIR/redis"
PG_DIR_FILE="$RUN_DIR/pg.datadir" # where the throwaway cluster lives (normally .run/pg)

log() { printf 'services: %s\n' "$*" >&2; }
die() {
	printf 'services: error: %s\n' "$*" >&2
	exit 1
}

# shquote S: S in single quotes, for eval.
shquote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

is_root() { [[ $(id -u) -eq 0 ]]; }

as_root() {
	if is_root; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "need root (or sudo) to run: $*"
	fi
}

APT_UPDATED=0
apt_install() {
	command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install $* yourself, or set DATABASE_URL / REDIS_URL"
	log "installing $* with apt-get"
	if [[ $APT_UPDATED -eq 0 ]]; then
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
		APT_UPDATED=1
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2
}

# tcp_open PORT: something accepts TCP connections on 127.0.0.1:PORT.
tcp_open() {
	# shellcheck disable=SC2016 # $1 is expanded by the inner bash
	timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
}

# lock serialises concurrent invocations (make test and make run started together).
lock() {
	mkdir -p "$RUN_DIR"
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$RUN_DIR/.services.lock"
		flock -w 300 9 || die "timed out waiting for $RUN_DIR/.services.lock"
	fi
}

# ---------------------------------------------------------------------------------------------------
# Postgres

pg_bindir() {
	local d
	# Newest major version first.
	for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -t/ -k5 -V -r); do
		if [[ -x $d/initdb && -x $d/pg_ctl ]]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

ensure_pg_binaries() {
	if ! pg_bindir >/dev/null; then
		apt_install postgresql
		pg_bindir >/dev/null || die "postgresql installed but no /usr/lib/postgresql/*/bin/initdb found"
	fi
}

psql_bin() {
	if command -v psql >/dev/null 2>&1 && psql --version >/dev/null 2>&1; then
		command -v psql
		return 0
	fi
	local d
	if d=$(pg_bindir) && [[ -x $d/psql ]]; then
		echo "$d/psql"
		return 0
	fi
	return 1
}

ensure_psql() {
	if ! psql_bin >/dev/null; then
		apt_install postgresql-client
		psql_bin >/dev/null || die "postgresql-client installed but psql not found"
	fi
}

# libpq_url URL: URL without query parameters libpq does not know (pgx's pool_* and the like).
libpq_url() {
	local url=$1 base query kept="" p
	base=${url%%\?*}
	[[ $url == *\?* ]] || {
		echo "$url"
		return
	}
	query=${url#*\?}
	local IFS='&'
	for p in $query; do
		case ${p%%=*} in
		sslmode | sslrootcert | sslcert | sslkey | connect_timeout | application_name | options | target_session_attrs | password | user | host | port | dbname)
			kept+="${kept:+&}$p"
			;;
		esac
	done
	echo "$base${kept:+?$kept}"
}

# pg_usable PORT: Postgres on 127.0.0.1:PORT accepts user postgres without a password.
pg_usable() {
	local port=$1 rc=0 psql
	if command -v pg_isready >/dev/null 2>&1; then
		pg_isready -q -h 127.0.0.1 -p "$port" -t 3 >/dev/null 2>&1 || rc=$?
		# 0 accepting, 1 rejecting (starting up), 2 no response, 3+ no attempt / broken wrapper.
		case $rc in
		0) ;;
		1 | 2) return 1 ;;
		*) tcp_open "$port" || return 1 ;;
		esac
	else
		tcp_open "$port" || return 1
	fi
	# It answers; when psql is here, make sure we can log in as we will.
	if psql=$(psql_bin); then
		if ! PGCONNECT_TIMEOUT=5 "$psql" -w -X -q -At \
			"postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable" -c 'select 1' >/dev/null 2>&1; then
			log "Postgres on 127.0.0.1:$port answers but refuses user postgres without a password"
			return 1
		fi
	fi
	return 0
}

# pg_datadir: where the throwaway cluster lives. .run/pg, unless (as root) the postgres OS user cannot
# reach the checkout or the socket path would be too long; then under the postgres user's home.
pg_datadir() {
	local d
	if [[ -f $PG_DIR_FILE ]]; then
		d=$(<"$PG_DIR_FILE")
		if [[ -n $d && -d $d ]]; then
			echo "$d"
			return
		fi
	fi
	d="$RUN_DIR/pg"
	local sock="$d/.s.PGSQL.$PG_PORT"
	if ((${#sock} > 100)) || { is_root && ! (cd / && runuser -u postgres -- test -x "$RUN_DIR") 2>/dev/null; }; then
		local home sum
		home=$(getent passwd postgres | cut -d: -f6)
		sum=$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)
		d="${home:-/var/lib/postgresql}/hookwheel-$sum"
	fi
	echo "$d"
}

# pg_as_owner CMD...: run CMD as the cluster's owner (postgres when we are root; initdb refuses root).
pg_as_owner() {
	if is_root; then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

start_local_pg() {
	ensure_pg_binaries
	local bin datadir
	bin=$(pg_bindir)
	datadir=$(pg_datadir)
	mkdir -p "$RUN_DIR"

	if is_root && ! id -u postgres >/dev/null 2>&1; then
		log "creating the postgres OS user"
		useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
	fi

	if pg_as_owner "$bin/pg_ctl" -D "$datadir" status >/dev/null 2>&1; then
		if pg_usable "$PG_PORT"; then
			log "reusing throwaway Postgres in $datadir on 127.0.0.1:$PG_PORT"
			return 0
		fi
		die "a Postgres runs from $datadir but 127.0.0.1:$PG_PORT does not answer; try: $0 stop"
	fi

	if tcp_open "$PG_PORT"; then
		if pg_usable "$PG_PORT"; then
			log "reusing the Postgres already answering on 127.0.0.1:$PG_PORT"
			return 0
		fi
		die "port $PG_PORT is taken by something else; set HOOKWHEEL_PG_PORT"
	fi

	if [[ ! -f $datadir/PG_VERSION ]]; then
		log "initdb: throwaway Postgres cluster in $datadir"
		rm -rf "$datadir"
		mkdir -p "$datadir"
		chmod 700 "$datadir"
		if is_root; then chown postgres: "$datadir"; fi
		pg_as_owner "$bin/initdb" -D "$datadir" -U postgres --auth=trust --encoding=UTF8 \
			--locale=C --no-sync --no-instructions >&2
	fi
	echo "$datadir" >"$PG_DIR_FILE"

	log "starting throwaway Postgres on 127.0.0.1:$PG_PORT (log: $datadir/server.log)"
	# Throwaway data: durability off for speed; room for parallel test packages.
	# 9>&-: the daemon must not inherit (and so hold forever) the lock file descriptor.
	if ! pg_as_owner "$bin/pg_ctl" -D "$datadir" -l "$datadir/server.log" -w -t 60 \
		-o "-p $PG_PORT -k $datadir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=500" \
		start >&2 9>&-; then
		tail -n 30 "$datadir/server.log" >&2 || true
		die "could not start Postgres from $datadir"
	fi
	pg_usable "$PG_PORT" || die "throwaway Postgres started but does not accept user postgres"
}

choose_database_url() {
	if [[ -n ${DATABASE_URL:-} ]]; then
		log "Postgres: DATABASE_URL from the environment"
		echo "$DATABASE_URL"
		return
	fi
	if [[ $FORCE_LOCAL != 1 ]] && pg_usable 5432; then
		log "Postgres: 127.0.0.1:5432"
		echo "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
		return
	fi
	start_local_pg
	log "Postgres: throwaway instance on 127.0.0.1:$PG_PORT"
	echo "postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
}

stop_local_pg() {
	local datadir="" bin
	[[ -f $PG_DIR_FILE ]] && datadir=$(<"$PG_DIR_FILE")
	[[ -z $datadir ]] && datadir="$RUN_DIR/pg"
	[[ -f $datadir/PG_VERSION ]] || return 0
	if ! bin=$(pg_bindir); then
		log "no pg_ctl found; cannot stop Postgres in $datadir"
		return 0
	fi
	if pg_as_owner "$bin/pg_ctl" -D "$datadir" status >/dev/null 2>&1; then
		log "stopping throwaway Postgres ($datadir)"
		pg_as_owner "$bin/pg_ctl" -D "$datadir" -m fast -w -t 60 stop >&2
	else
		log "throwaway Postgres ($datadir) is not running"
	fi
}

# ---------------------------------------------------------------------------------------------------
# Redis

redis_ping() {
	local port=$1
	if command -v redis-cli >/dev/null 2>&1; then
		[[ $(timeout 3 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]]
	else
		# shellcheck disable=SC2016 # expanded by the inner bash
		timeout 3 bash -c '
			exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
			printf "PING\r\n" >&3
			IFS= read -r line <&3 || exit 1
			[[ $line == +PONG* ]]' _ "$port" 2>/dev/null
	fi
}

redis_server_bin() {
	if command -v redis-server >/dev/null 2>&1; then
		command -v redis-server
	elif [[ -x /usr/bin/redis-server ]]; then
		echo /usr/bin/redis-server
	else
		return 1
	fi
}

# our_redis_pid: pid of the throwaway redis-server recorded in .run/redis, when it is alive.
our_redis_pid() {
	local pid
	[[ -f $REDIS_DIR/redis.pid ]] || return 1
	pid=$(<"$REDIS_DIR/redis.pid")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q redis || return 1
	echo "$pid"
}

start_local_redis() {
	if ! redis_server_bin >/dev/null; then
		apt_install redis-server
		redis_server_bin >/dev/null || die "redis-server installed but not found"
	fi
	local server
	server=$(redis_server_bin)

	if our_redis_pid >/dev/null && redis_ping "$REDIS_PORT"; then
		log "reusing throwaway Redis on 127.0.0.1:$REDIS_PORT"
		return 0
	fi
	if tcp_open "$REDIS_PORT"; then
		if redis_ping "$REDIS_PORT"; then
			log "reusing the Redis already answering on 127.0.0.1:$REDIS_PORT"
			return 0
		fi
		die "port $REDIS_PORT is taken by something else; set HOOKWHEEL_REDIS_PORT"
	fi

	mkdir -p "$REDIS_DIR"
	rm -f "$REDIS_DIR/redis.pid"
	log "starting throwaway Redis on 127.0.0.1:$REDIS_PORT (log: $REDIS_DIR/redis.log)"
	"$server" --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
		--dir "$REDIS_DIR" --pidfile "$REDIS_DIR/redis.pid" --logfile "$REDIS_DIR/redis.log" >&2 9>&-
	local i
	for ((i = 0; i < 100; i++)); do
		redis_ping "$REDIS_PORT" && return 0
		sleep 0.1
	done
	tail -n 30 "$REDIS_DIR/redis.log" >&2 || true
	die "throwaway Redis did not answer on 127.0.0.1:$REDIS_PORT"
}

choose_redis_url() {
	if [[ -n ${REDIS_URL:-} ]]; then
		log "Redis: REDIS_URL from the environment"
		echo "$REDIS_URL"
		return
	fi
	if [[ $FORCE_LOCAL != 1 ]] && redis_ping 6379; then
		log "Redis: 127.0.0.1:6379"
		echo "redis://127.0.0.1:6379/0"
		return
	fi
	start_local_redis
	log "Redis: throwaway instance on 127.0.0.1:$REDIS_PORT"
	echo "redis://127.0.0.1:$REDIS_PORT/0"
}

stop_local_redis() {
	local pid i
	if ! pid=$(our_redis_pid); then
		[[ -d $REDIS_DIR ]] && log "throwaway Redis is not running"
		return 0
	fi
	log "stopping throwaway Redis (pid $pid)"
	kill -TERM "$pid"
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || {
			rm -f "$REDIS_DIR/redis.pid"
			return 0
		}
		sleep 0.1
	done
	log "Redis (pid $pid) ignored SIGTERM for 10s; killing it"
	kill -KILL "$pid" 2>/dev/null || true
	rm -f "$REDIS_DIR/redis.pid"
}

# ---------------------------------------------------------------------------------------------------

cmd_env() {
	lock
	local db redis
	db=$(choose_database_url)
	redis=$(choose_redis_url)
	printf 'export DATABASE_URL=%s REDIS_URL=%s\n' "$(shquote "$db")" "$(shquote "$redis")"
}

cmd_createdb() {
	local name=${1:-}
	[[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "usage: $0 createdb NAME (letters, digits, _)"
	lock
	local db psql url exists
	db=$(choose_database_url)
	ensure_psql
	psql=$(psql_bin)
	url=$(libpq_url "$db")
	exists=$(PGCONNECT_TIMEOUT=10 "$psql" -w -X -q -At "$url" \
		-c "select 1 from pg_database where datname = '$name'") ||
		die "cannot query Postgres at $db"
	if [[ $exists == 1 ]]; then
		log "database $name exists"
		return 0
	fi
	log "creating database $name"
	if ! PGCONNECT_TIMEOUT=10 "$psql" -w -X -q "$url" -c "create database \"$name\"" >&2; then
		# Lost a race with another creator?
		exists=$("$psql" -w -X -q -At "$url" -c "select 1 from pg_database where datname = '$name'") || true
		[[ $exists == 1 ]] || die "could not create database $name"
	fi
}

cmd_ensure_cc() {
	local cc=${CC:-gcc}
	if ! command -v "$cc" >/dev/null 2>&1; then
		log "no C compiler ($cc); go test -race needs one"
		apt_install gcc libc6-dev
	fi
	ensure_pgbouncer
}

# pgbouncer_bin: the pgbouncer binary (Debian puts it in /usr/sbin, not on every user's PATH).
pgbouncer_bin() {
	if command -v pgbouncer >/dev/null 2>&1; then
		command -v pgbouncer
	elif [[ -x /usr/sbin/pgbouncer ]]; then
		echo /usr/sbin/pgbouncer
	else
		return 1
	fi
}

# ensure_pgbouncer: the tests start throwaway PgBouncers of their own (store/storetest/pgbouncer.go)
# and fail without the binary. Debian's package also installs a pgbouncer service, which its
# default configuration keeps on 127.0.0.1:6432 and which the tests do not use.
ensure_pgbouncer() {
	if ! pgbouncer_bin >/dev/null; then
		log "no pgbouncer; the tests behind a connection pooler need it"
		apt_install pgbouncer
		pgbouncer_bin >/dev/null || die "pgbouncer installed but not found"
	fi
	# The tests run it as the postgres OS user when they run as root (PgBouncer refuses root).
	if is_root && ! id -u postgres >/dev/null 2>&1; then
		log "creating the postgres OS user"
		useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
	fi
}

cmd_stop() {
	lock
	stop_local_pg
	stop_local_redis
}

cmd_status() {
	local pgdesc redisdesc
	if [[ -n ${DATABASE_URL:-} ]]; then
		pgdesc="DATABASE_URL from the environment"
	elif [[ $FORCE_LOCAL != 1 ]] && pg_usable 5432; then
		pgdesc="127.0.0.1:5432"
	elif pg_usable "$PG_PORT"; then
		pgdesc="throwaway on 127.0.0.1:$PG_PORT ($(pg_datadir)), running"
	else
		pgdesc="throwaway on 127.0.0.1:$PG_PORT ($(pg_datadir)), not running"
	fi
	if [[ -n ${REDIS_URL:-} ]]; then
		redisdesc="REDIS_URL from the environment"
	elif [[ $FORCE_LOCAL != 1 ]] && redis_ping 6379; then
		redisdesc="127.0.0.1:6379"
	elif redis_ping "$REDIS_PORT"; then
		redisdesc="throwaway on 127.0.0.1:$REDIS_PORT, running"
	else
		redisdesc="throwaway on 127.0.0.1:$REDIS_PORT, not running"
	fi
	echo "Postgres: $pgdesc"
	echo "Redis:    $redisdesc"
}

usage() {
	sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2
	exit 2
}

case ${1:-} in
env) cmd_env ;;
createdb)
	shift
	cmd_createdb "$@"
	;;
stop) cmd_stop ;;
ensure-cc) cmd_ensure_cc ;;
status) cmd_status ;;
-h | --help | help) usage ;;
*) usage ;;
esac
