#!/usr/bin/env bash
# `make run`: hookwheel (API and dispatcher) on :8080 against Postgres and Redis (see services.sh),
# with a demo tenant and a demo receiver that prints the webhooks it gets. Ctrl-C stops everything
# this script started; the throwaway Postgres and Redis keep running until `make stop`.
#
# Environment: DATABASE_URL (used as is when set; else database `hookwheel` on the Postgres services.sh
# picks), REDIS_URL, HOOKWHEEL_ADDR (default :8080), HOOKWHEEL_ADMIN_TOKEN (default: .run/admin-token,
# created once), HOOKWHEEL_ENCRYPTION_KEY (default: .run/encryption-key, created once), HOOKWHEEL_DEMO_RECEIVER_ADDR (default 127.0.0.1:9000), and every other HOOKWHEEL_*
# variable hookwheel reads.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
RUN_DIR="$ROOT/.run"
SERVICES="$ROOT/deploy/dev/services.sh"
BIN="$ROOT/bin/hookwheel"
mkdir -p "$RUN_DIR"

say() { printf 'run: %s\n' "$*" >&2; }
die() {
	printf 'run: error: %s\n' "$*" >&2
	exit 1
}

as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		return 1
	fi
}

APT_UPDATED=0
# ensure_tool COMMAND PACKAGE: install Debian's PACKAGE when COMMAND is missing; false when that fails.
ensure_tool() {
	command -v "$1" >/dev/null 2>&1 && return 0
	command -v apt-get >/dev/null 2>&1 || return 1
	say "installing $2"
	if ((!APT_UPDATED)); then
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 || return 1
		APT_UPDATED=1
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$2" >&2 || return 1
	command -v "$1" >/dev/null 2>&1
}

# ---------------------------------------------------------------------------------------------------
# Child processes: stopped on Ctrl-C, on SIGTERM, on any error, and when the server exits by itself.

SERVE_PID=""
RECEIVER_PID=""

# shellcheck disable=SC2317 # called from the EXIT trap
stop_children() {
	local pids=() p i alive
	for p in "$SERVE_PID" "$RECEIVER_PID"; do
		if [[ -n $p ]] && kill -0 "$p" 2>/dev/null; then pids+=("$p"); fi
	done
	if ((${#pids[@]} == 0)); then return 0; fi
	say "stopping hookwheel"
	kill -TERM "${pids[@]}" 2>/dev/null || true
	for ((i = 0; i < 150; i++)); do # 15 s to drain in-flight deliveries
		alive=0
		for p in "${pids[@]}"; do
			if kill -0 "$p" 2>/dev/null; then alive=1; fi
		done
		if ((alive == 0)); then break; fi
		sleep 0.1
	done
	for p in "${pids[@]}"; do
		if kill -0 "$p" 2>/dev/null; then
			say "pid $p ignored SIGTERM for 15 s; killing it"
			kill -KILL "$p" 2>/dev/null || true
		fi
	done
	wait "${pids[@]}" 2>/dev/null || true
}

trap stop_children EXIT
trap 'exit 0' INT TERM # the EXIT trap does the stopping

# ---------------------------------------------------------------------------------------------------
# Tools

ensure_tool curl curl || die "curl is missing and could not be installed"
HAVE_JQ=0
if ensure_tool jq jq; then HAVE_JQ=1; else say "no jq; parsing JSON with sed"; fi

# ---------------------------------------------------------------------------------------------------
# Postgres and Redis

user_database_url=${DATABASE_URL:-}
svc_env=$("$SERVICES" env)
eval "$svc_env"
if [[ -z $user_database_url ]]; then
	# services.sh gave us its maintenance database; hookwheel gets a database of its own.
	"$SERVICES" createdb hookwheel
	query=""
	[[ $DATABASE_URL == *\?* ]] && query="?${DATABASE_URL#*\?}"
	base=${DATABASE_URL%%\?*}
	DATABASE_URL="${base%/*}/hookwheel$query"
fi
export DATABASE_URL REDIS_URL

# ---------------------------------------------------------------------------------------------------
# Build and configure

command -v go >/dev/null 2>&1 || [[ ! -x /usr/local/go/bin/go ]] || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || die "go not found on PATH"
say "building $BIN"
go build -o "$BIN" ./cmd/hookwheel

if [[ -z ${HOOKWHEEL_ADMIN_TOKEN:-} ]]; then
	if [[ ! -s $RUN_DIR/admin-token ]]; then
		(
			umask 077
			printf 'hw_admin_%s\n' "$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')" >"$RUN_DIR/admin-token"
		)
	fi
	HOOKWHEEL_ADMIN_TOKEN=$(<"$RUN_DIR/admin-token")
fi
export HOOKWHEEL_ADMIN_TOKEN
if [[ -z ${HOOKWHEEL_ENCRYPTION_KEY:-} ]]; then
	if [[ ! -s $RUN_DIR/encryption-key ]]; then
		(
			umask 077
			head -c 32 /dev/urandom | base64 >"$RUN_DIR/encryption-key"
		)
	fi
	HOOKWHEEL_ENCRYPTION_KEY=$(<"$RUN_DIR/encryption-key")
fi
export HOOKWHEEL_ENCRYPTION_KEY
export HOOKWHEEL_ALLOW_PRIVATE_TARGETS="${HOOKWHEEL_ALLOW_PRIVATE_TARGETS:-true}" # the demo receiver is on loopback
export HOOKWHEEL_LOG_FORMAT="${HOOKWHEEL_LOG_FORMAT:-text}"               # readable in a terminal; json in production

ADDR="${HOOKWHEEL_ADDR:-:8080}"
PORT=${ADDR##*:}
HOST=${ADDR%:*}
HOST=${HOST#[}
HOST=${HOST%]}
case $HOST in
"" | 0.0.0.0 | :: | localhost) HOST=localhost ;;
*:*) HOST="[$HOST]" ;;
esac
API="http://$HOST:$PORT"
[[ $HOST == localhost ]] && API_SHORT="localhost:$PORT" || API_SHORT="$API"
RECEIVER_ADDR="${HOOKWHEEL_DEMO_RECEIVER_ADDR:-127.0.0.1:9000}"

port_busy() {
	local host=${1%:*} port=${1##*:}
	[[ -z $host || $host == 0.0.0.0 || $host == localhost ]] && host=127.0.0.1
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$host" "$port" 2>/dev/null
}
port_busy "$HOST:$PORT" && die "something already listens on port $PORT (another make run?); stop it or set HOOKWHEEL_ADDR"

# ---------------------------------------------------------------------------------------------------
# Migrate and serve

say "migrating $(sed -E 's|//([^:/@]*):[^@/]*@|//\1:***@|' <<<"$DATABASE_URL")"
"$BIN" migrate
# Seals signing secrets stored before the encryption key was set (a demo tenant of an older checkout).
"$BIN" secrets rekey >&2

say "starting hookwheel serve on $ADDR (log also in .run/serve.log)"
# The log goes to this terminal and to .run/serve.log; tee ignores Ctrl-C so the shutdown log is kept.
"$BIN" serve > >(
	trap '' INT TERM
	exec tee "$RUN_DIR/serve.log"
) 2>&1 &
SERVE_PID=$!

deadline=$((SECONDS + 30))
until curl -fsS -o /dev/null "$API/readyz" 2>/dev/null; do
	if ! kill -0 "$SERVE_PID" 2>/dev/null; then
		rc=0
		wait "$SERVE_PID" || rc=$?
		SERVE_PID=""
		printf '\n--- last lines of .run/serve.log ---\n' >&2
		tail -n 40 "$RUN_DIR/serve.log" >&2 || true
		die "hookwheel serve exited with status $rc before it was ready"
	fi
	if ((SECONDS >= deadline)); then
		printf '\n--- last lines of .run/serve.log ---\n' >&2
		tail -n 40 "$RUN_DIR/serve.log" >&2 || true
		curl -sS "$API/readyz" >&2 || true
		die "hookwheel was not ready at $API/readyz within 30 s"
	fi
	sleep 0.3
done

# ---------------------------------------------------------------------------------------------------
# Demo tenant

# json_field FILE KEY: the string value of top-level KEY in the JSON object in FILE.
json_field() {
	if ((HAVE_JQ)); then
		jq -er --arg k "$2" '.[$k] | strings' "$1"
	else
		tr -d '\n' <"$1" | sed -nE 's/.*"'"$2"'"[[:space:]]*:[[:space:]]*"([^"]*)".*/\1/p' | grep .
	fi
}

TENANT_FILE="$RUN_DIR/demo-tenant.json"
API_KEY=""
if [[ -s $TENANT_FILE ]] && API_KEY=$(json_field "$TENANT_FILE" api_key) &&
	[[ $(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $API_KEY" "$API/v1/tasks?limit=1") == 200 ]]; then
	say "reusing the demo tenant in .run/demo-tenant.json"
else
	say "creating the demo tenant"
	(
		umask 077
		"$BIN" tenant create --name demo >"$TENANT_FILE.tmp"
	)
	mv "$TENANT_FILE.tmp" "$TENANT_FILE"
	API_KEY=$(json_field "$TENANT_FILE" api_key) || die "no api_key in the output of hookwheel tenant create: $(<"$TENANT_FILE")"
fi
TENANT_ID=$(json_field "$TENANT_FILE" id) || TENANT_ID="?"
SIGNING_SECRET=$(json_field "$TENANT_FILE" signing_secret) || die "no signing_secret in $TENANT_FILE"

# ---------------------------------------------------------------------------------------------------
# Demo receiver

if port_busy "$RECEIVER_ADDR"; then
	say "warning: $RECEIVER_ADDR is taken, so the demo receiver does not start (set HOOKWHEEL_DEMO_RECEIVER_ADDR)"
else
	"$BIN" receive --addr "$RECEIVER_ADDR" --secret "$SIGNING_SECRET" &
	RECEIVER_PID=$!
	sleep 0.5
	if ! kill -0 "$RECEIVER_PID" 2>/dev/null; then
		wait "$RECEIVER_PID" || true
		RECEIVER_PID=""
		say "warning: the demo receiver did not start; the demo webhook will be retried until it fails"
	fi
fi

# ---------------------------------------------------------------------------------------------------
# Banner

DEMO_URL="http://$RECEIVER_ADDR/demo"
SCHEDULE_CURL="curl -sS -X POST $API_SHORT/v1/tasks -H \"Authorization: Bearer $API_KEY\" -H 'Content-Type: application/json' -d '{\"url\":\"$DEMO_URL\",\"body\":\"{\\\"hello\\\":\\\"world\\\"}\",\"delay\":\"5s\"}'"
LIST_CURL="curl -sS $API_SHORT/v1/tasks -H \"Authorization: Bearer $API_KEY\""

# One demo webhook, due a minute from now, to watch arrive in the dashboard.
DEMO_TASK_FILE="$RUN_DIR/demo-task.json"
DEMO_TASK_ID="?"
if curl -fsS -o "$DEMO_TASK_FILE" -X POST "$API/v1/tasks" -H "Authorization: Bearer $API_KEY" -H 'Content-Type: application/json' \
	-d "{\"url\":\"$DEMO_URL\",\"body\":\"{\\\"hello\\\":\\\"dashboard\\\"}\",\"delay\":\"60s\"}"; then
	DEMO_TASK_ID=$(json_field "$DEMO_TASK_FILE" id) || DEMO_TASK_ID="?"
else
	say "warning: the demo webhook could not be scheduled"
fi

cat <<EOF

================================================================================
 hookwheel is running (API and dispatcher)

   Dashboard       $API/ui/   (sign in with the API key below; operators with the admin token)
   API             $API   (OpenAPI: $API/openapi.yaml)
   admin token     $HOOKWHEEL_ADMIN_TOKEN
   encryption key  .run/encryption-key (seals signing secrets at rest)
   demo tenant     $TENANT_ID
   API key         $API_KEY
   signing secret  $SIGNING_SECRET
   Postgres        $(sed -E 's|//([^:/@]*):[^@/]*@|//\1:***@|' <<<"$DATABASE_URL")
   Redis           $REDIS_URL

 A demo webhook is due in 60 seconds; watch it arrive:

   $API/ui/tasks/$DEMO_TASK_ID

 Schedule another to the demo receiver in 5 seconds:

   $SCHEDULE_CURL

 List the tenant's tasks:

   $LIST_CURL

 The demo receiver ($DEMO_URL) verifies and prints every webhook it gets
 in this terminal. Ctrl-C stops hookwheel; \`make stop\` stops throwaway Postgres/Redis.
================================================================================

EOF

# ---------------------------------------------------------------------------------------------------
# Wait for the server; Ctrl-C / SIGTERM interrupt the wait and the traps stop everything.

rc=0
wait "$SERVE_PID" || rc=$?
SERVE_PID=""
say "hookwheel serve exited with status $rc"
exit "$rc"
