#!/usr/bin/env bash
# What the tests written in JavaScript and Python need (the dashboard's in Chromium, the TypeScript and
# Python SDKs'), installed when missing:
#
#   deploy/dev/web.sh ensure     # Node.js and npm, Debian's chromium, the npm packages of web/ and
#                                # sdk/typescript/ (npm ci), and Debian's python3, python3-pytest and python3-mypy
#
# Node and Chromium come from Debian's packages (no browser download: Playwright drives
# /usr/bin/chromium); the npm packages from web/package-lock.json, reinstalled when it changes.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WEB="$ROOT/web"

log() { printf 'web: %s\n' "$*" >&2; }
die() {
	printf 'web: error: %s\n' "$*" >&2
	exit 1
}

as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "need root (or sudo) to run: $*"
	fi
}

APT_UPDATED=0
apt_install() {
	command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install $* yourself"
	log "installing $* with apt-get"
	if ((!APT_UPDATED)); then
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
		APT_UPDATED=1
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2
}

has_python_test_tools() {
	local py
	for py in python3 /usr/bin/python3; do
		command -v "$py" >/dev/null 2>&1 || continue
		"$py" -c 'import sys, pytest, mypy; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && return 0
	done
	return 1
}

cmd_ensure() {
	local want=()
	command -v node >/dev/null 2>&1 || want+=(nodejs)
	command -v npm >/dev/null 2>&1 || want+=(npm)
	[[ -x ${CHROMIUM_PATH:-/usr/bin/chromium} ]] || want+=(chromium)
	# sdk/python's tests (TestPythonSDK) run on a Python 3.11+ with pytest (and mypy, for its type check):
	# python3 on PATH, else Debian's /usr/bin/python3 (PATH may name a pyenv's or a venv's without them).
	has_python_test_tools || want+=(python3 python3-pytest python3-mypy)
	if ((${#want[@]})); then apt_install "${want[@]}"; fi
	# npm ci only when the lockfile changed since the last install: it deletes and rewrites
	# node_modules, which takes seconds on every run otherwise.
	local dir stamp
	for dir in "$WEB" "$ROOT/sdk/typescript"; do
		stamp="$dir/node_modules/.package-lock.json"
		if [[ ! -f $stamp || $dir/package-lock.json -nt $stamp ]]; then
			log "npm ci in ${dir#"$ROOT"/}/"
			(cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >&2)
		fi
	done
}

case "${1:-}" in
ensure) cmd_ensure ;;
*)
	echo "usage: $0 ensure" >&2
	exit 2
	;;
esac
