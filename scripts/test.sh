#!/usr/bin/env bash
# Runs every test of the repository, installing what the tests need.
#
#   ./scripts/test.sh            everything
#   ./scripts/test.sh go         Go tests only (vet, unit, conformance, brief fuzzing)
#   ./scripts/test.sh e2e        end-to-end tests only (real mlflow client)
#   ./scripts/test.sh ui         web UI: type-check, unit tests, embedded build
#                                check, browser tests (Debian's chromium)
#   ./scripts/test.sh docs       every command block of README.md and docs/,
#                                run as written (tests/docs/README.md)
#
# Heavy installs (Python virtual environments with the mlflow client) are
# cached outside the clone, in $SEXTANT_CACHE_DIR (default
# ~/.cache/sextant), keyed by the pinned versions, so a warm machine installs
# nothing. Environment knobs:
#   SEXTANT_FUZZTIME   time per fuzz target (default 10s; 0 skips fuzzing)
#   SEXTANT_MLFLOW_VERSIONS  mlflow versions to test against
#                     (default: the oldest supported and the newest)
#   SEXTANT_TEST_TMPFS  "required" (the default as root, as in CI): the
#                     full-disk tests, which mount a small tmpfs, fail
#                     instead of skipping when they cannot mount one
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
WHAT=${1:-all}
CACHE=${SEXTANT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sextant}
FUZZTIME=${SEXTANT_FUZZTIME:-10s}
MLFLOW_VERSIONS=${SEXTANT_MLFLOW_VERSIONS:-"3.7.0 3.17.2"}
PYTHON=${PYTHON:-python3}
if [ "$(id -u)" = 0 ]; then
	export SEXTANT_TEST_TMPFS=${SEXTANT_TEST_TMPFS:-required}
fi

failed=()
step() { printf '\n=== %s\n' "$*"; }
fail() { failed+=("$1"); printf '!!! FAILED: %s\n' "$1"; }

# ensure_postgres makes sure initdb and postgres are installed (the tests
# start their own throwaway server, see internal/pgtest); on a machine
# without them it installs Debian's package when it can.
ensure_postgres() {
	if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
		return 0
	fi
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
		return
	fi
	echo "PostgreSQL is not installed: install it (apt-get install postgresql) or set SEXTANT_TEST_POSTGRES_URL" >&2
	return 1
}

# ensure_promtool exports SEXTANT_PROMTOOL, the promtool that
# TestPrometheusMetrics checks /metrics with: one on PATH, else the one
# extracted from Debian's prometheus package into $CACHE/promtool (cached
# by the package's version). The package is downloaded and unpacked, not
# installed: nothing starts a Prometheus server, and no root is needed
# when apt's package lists are there (as root it updates them if needed).
ensure_promtool() {
	if command -v promtool >/dev/null 2>&1; then
		SEXTANT_PROMTOOL=$(command -v promtool)
		export SEXTANT_PROMTOOL
		return 0
	fi
	local ver dir tmp
	ver=$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')
	if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then
		[ "$(id -u)" = 0 ] && apt-get update -qq
		ver=$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')
	fi
	[ -n "$ver" ] && [ "$ver" != "(none)" ] || { echo "no prometheus package known to apt (run apt-get update)" >&2; return 1; }
	dir="$CACHE/promtool/${ver//[^A-Za-z0-9.+-]/_}"
	if [ ! -x "$dir/promtool" ]; then
		tmp=$(mktemp -d)
		(cd "$tmp" && apt-get download -qq "prometheus=$ver" >/dev/null 2>&1) &&
			dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x" &&
			mkdir -p "$dir" && cp "$tmp/x/usr/bin/promtool" "$dir/promtool.$$" && mv "$dir/promtool.$$" "$dir/promtool"
		local rc=$?
		rm -rf "$tmp"
		[ $rc = 0 ] || { echo "could not download Debian's prometheus package for promtool" >&2; return 1; }
	fi
	SEXTANT_PROMTOOL="$dir/promtool"
	export SEXTANT_PROMTOOL
}

run_go() {
	step "go: gofmt"
	local unformatted
	unformatted=$(gofmt -l cmd internal bench 2>&1)
	if [ -n "$unformatted" ]; then
		echo "$unformatted"
		fail "gofmt (run gofmt -w on the files above)"
	fi

	step "go: vet"
	go vet ./... || fail "go vet"

	step "go: MinIO for the S3 blob-store tests (built once, cached)"
	./scripts/minio.sh >/dev/null || fail "build MinIO"

	step "go: PostgreSQL for the PostgreSQL store tests"
	ensure_postgres || fail "install PostgreSQL (apt-get install postgresql)"

	step "go: promtool for the Prometheus exposition tests (Debian's prometheus package, cached)"
	ensure_promtool || fail "get promtool (Debian's prometheus package)"

	step "go: unit, conformance and handler tests"
	# cmd/sextant takes about 100 s on a quiet machine, SQLite's recompile
	# (TestBuildPrintsNothing) included: a slow CI machine must not meet
	# go test's default 10-minute limit per package.
	go test -count=1 -timeout 30m ./... || fail "go test"

	step "go: race detector on the concurrent packages"
	go test -count=1 -race -short ./internal/sqlstore/ ./internal/httpapi/ ./internal/blob/... ./internal/wire/ ./internal/tracking/... ./internal/gpu/... ./internal/runlogs/... ./internal/launcher/ ./cmd/sextant/ || fail "go test -race"

	if [ "$FUZZTIME" != "0" ]; then
		step "go: fuzzing each target for $FUZZTIME"
		local f target
		for f in $(grep -rlE '^func Fuzz' --include='*_test.go' internal | sort); do
			for target in $(grep -oE '^func Fuzz[A-Za-z0-9_]+' "$f" | sed 's/^func //'); do
				fuzz_one "./$(dirname "$f")/" "$target" || fail "fuzz ./$(dirname "$f") $target"
			done
		done
		rm -f /tmp/sextant-fuzz.$$
	fi
}

# fuzz_one PKG TARGET fuzzes one target for $FUZZTIME. Go 1.26's fuzz
# coordinator can report "context deadline exceeded" at the end of a
# time-based -fuzztime on a busy machine although no input failed
# (golang/go#75804, fixed in Go 1.27): such a run wrote no failing input,
# so it is run once more, and said so. A run that wrote a failing input
# (testdata/fuzz/TARGET/...) fails at once. -fuzzminimizetime: the
# workers also shrink every input that finds new code, for up to 60 s by
# default, and run nothing new meanwhile (FuzzDecodeLogAppend spent 40 of
# 45 s so); 2 s keeps them fuzzing, and a failing input is written all the
# same, only less shrunk.
fuzz_one() {
	local pkg=$1 target=$2 try
	for try in 1 2; do
		if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 2s "$pkg" >/tmp/sextant-fuzz.$$ 2>&1; then
			echo "ok  	$pkg $target (fuzzed $FUZZTIME)"
			return 0
		fi
		cat /tmp/sextant-fuzz.$$
		if [ "$try" = 1 ] && grep -q 'context deadline exceeded' /tmp/sextant-fuzz.$$ && ! grep -q 'Failing input written' /tmp/sextant-fuzz.$$; then
			echo "--- $target: no failing input was written (golang/go#75804, the fuzz coordinator's deadline race); fuzzing it once more"
			continue
		fi
		return 1
	done
	return 1
}

# venv_for VERSION prints the path of a cached virtual environment with
# mlflow==VERSION and the e2e requirements, creating it if needed.
venv_for() {
	local version=$1
	local pyver reqhash dir
	pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	reqhash=$(sha256sum tests/e2e/requirements.txt | cut -c1-12)
	dir="$CACHE/venv/mlflow-$version-py$pyver-$reqhash"
	venv_install "$dir" "mlflow==$version" -r tests/e2e/requirements.txt || return 1
	echo "$dir"
}

# venv_install DIR PIP-ARGS... creates the virtual environment DIR with
# PIP-ARGS installed, unless it is there and complete (a marker file written
# last tells a complete environment from an interrupted one). Two test runs
# on one machine share the cache: a lock beside DIR makes the second wait
# for the first's install instead of deleting it half-way (a venv cannot be
# built elsewhere and renamed: its scripts name their own path).
venv_install() {
	local dir=$1
	shift
	[ -f "$dir/.complete" ] && return 0
	mkdir -p "$CACHE/venv"
	(
		if command -v flock >/dev/null; then
			exec 9>"$dir.lock"
			flock 9
		fi
		[ -f "$dir/.complete" ] && exit 0
		echo "installing $* into $dir (cached for later runs)" >&2
		rm -rf "$dir"
		"$PYTHON" -m venv "$dir" >&2 &&
			"$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >&2 &&
			touch "$dir/.complete" || { rm -rf "$dir"; exit 1; }
	)
}

# ml_venv prints the path of the cached environment with the training stack
# (torch, Lightning, Transformers and the newest mlflow), keyed by
# tests/e2e/requirements-ml.txt. torch brings its CUDA libraries from PyPI
# (a few GiB): the first install takes minutes, later runs none.
ml_venv() {
	local pyver reqhash dir
	pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	reqhash=$(sha256sum tests/e2e/requirements-ml.txt | cut -c1-12)
	dir="$CACHE/venv/ml-py$pyver-$reqhash"
	venv_install "$dir" -r tests/e2e/requirements-ml.txt || return 1
	echo "$dir"
}

run_e2e() {
	step "e2e: build sextant"
	local bin
	bin=$(mktemp -d)/sextant
	go build -o "$bin" ./cmd/sextant || { fail "build"; return; }
	# The PostgreSQL and S3 session, and the replica checkpoint test of the
	# ml session, start their own PostgreSQL server: `./scripts/test.sh e2e`
	# alone on a fresh machine installs it, as run_go does.
	step "e2e: PostgreSQL for the PostgreSQL and replica tests"
	ensure_postgres || fail "install PostgreSQL (apt-get install postgresql)"
	local env=(MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=true HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 SEXTANT_BIN="$bin" PYTHONPATH="$ROOT/python")
	local last_venv=
	for v in $MLFLOW_VERSIONS; do
		step "e2e: mlflow $v"
		local venv
		venv=$(venv_for "$v") || { fail "install mlflow $v"; continue; }
		# The import tests write their source database with MLflow's own SQL
		# store, which needs the newest mlflow (see the marker mlflow_sql).
		local marks="not ml and not replicas"
		[ "$v" = "${MLFLOW_VERSIONS##* }" ] || marks="$marks and not mlflow_sql"
		env "${env[@]}" "$venv/bin/python" -m pytest tests/e2e -q -p no:cacheprovider -m "$marks" || fail "e2e (mlflow $v)"
		last_venv=$venv
	done
	# Everything again on the scale-out stores: each server on its own
	# database of a PostgreSQL server and its own prefix of a MinIO bucket,
	# both started by the tests, and two replicas sharing both; less the
	# tests that look at the local directory's files, and the gigabyte
	# round trips.
	if [ -n "${last_venv:-}" ]; then
		step "e2e: PostgreSQL and S3 (MinIO)"
		env "${env[@]}" SEXTANT_E2E_DB=postgres SEXTANT_E2E_BLOB_STORE=s3 "$last_venv/bin/python" -m pytest tests/e2e \
			-q -p no:cacheprovider -m "not ml and not disk and not slow" || fail "e2e (PostgreSQL, S3)"
	fi
	step "e2e: training libraries (torch, Lightning, Transformers)"
	local mlv
	if mlv=$(ml_venv); then
		env "${env[@]}" "$mlv/bin/python" -m pytest tests/e2e -q -p no:cacheprovider -m ml || fail "e2e (ml)"
	else
		fail "install the ML test stack"
	fi
	rm -rf "$(dirname "$bin")"
}

# run_ui checks the web UI (web/, served from internal/ui/dist). npm
# packages come from a cache outside the clone; the browser is Debian's
# chromium, installed if missing (CI runs as root), never a downloaded one.
run_ui() {
	local tmp
	tmp=$(mktemp -d)
	step "ui: npm packages (cache: $CACHE/npm)"
	if ! (cd web && npm ci --prefer-offline --no-audit --no-fund --cache "$CACHE/npm"); then
		fail "npm ci in web/"
		return
	fi
	if [ ! -x /usr/bin/chromium ]; then
		step "ui: installing Debian's chromium"
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || fail "install chromium (apt-get install chromium)"
	fi

	step "ui: type-check (tsc --noEmit)"
	(cd web && npx tsc --noEmit -p .) || fail "ui type-check"

	step "ui: build from source, and unit tests"
	if (cd web && node build.mjs --tests --out "$tmp/dist"); then
		(cd web && node --test build-tests/) || fail "ui unit tests"
		step "ui: the embedded build (internal/ui/dist) matches the source"
		if ! diff -r "$tmp/dist" internal/ui/dist; then
			fail "internal/ui/dist is stale: run (cd web && npm run build) and commit internal/ui/dist"
		fi
	else
		fail "ui build"
	fi

	step "ui: browser tests (chromium, screenshots in ${SEXTANT_SCREENSHOTS:-web/test-results/screenshots})"
	go build -o "$tmp/sextant" ./cmd/sextant || { fail "build"; rm -rf "$tmp"; return; }
	# mlflow-links.test.mjs runs the real mlflow client (the newest version's
	# cached environment) to print the links it opens.
	local mlflow_py ml_py
	mlflow_py=$(venv_for "${MLFLOW_VERSIONS##* }")/bin/python || { fail "install mlflow for the browser tests"; mlflow_py=; }
	# mlflow-ui.test.mjs saves checkpoints with torch (the ML environment).
	ml_py=$(ml_venv)/bin/python || { fail "install the ML environment for the browser tests"; ml_py=; }
	(cd web && SEXTANT_BIN="$tmp/sextant" SEXTANT_MLFLOW_PYTHON="$mlflow_py" SEXTANT_ML_PYTHON="$ml_py" node --test --test-concurrency=1 test/e2e/) || fail "ui browser tests"
	rm -rf "$tmp"
}

# ensure_docs_tools makes sure the commands the docs' blocks use besides
# sextant and Python are there (curl, jq, sqlite3, rsync), installing
# Debian's packages when they are missing and it can (CI runs as root).
ensure_docs_tools() {
	local missing=() c
	for c in curl jq sqlite3 rsync; do
		command -v "$c" >/dev/null 2>&1 || missing+=("$c")
	done
	[ ${#missing[@]} = 0 ] && return 0
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
		return
	fi
	echo "the docs' blocks need ${missing[*]}: apt-get install ${missing[*]}" >&2
	return 1
}

# run_docs runs every command block of README.md and docs/ top to bottom,
# each page against a server of its own (tests/docs/README.md), in the ML
# environment: it has what the blocks use (the mlflow client, torch), and
# each page's `pip install` goes to a throwaway environment over it.
run_docs() {
	step "docs: the commands the blocks use (curl, jq, sqlite3, rsync)"
	ensure_docs_tools || fail "install the docs' commands (apt-get install curl jq sqlite3 rsync)"
	step "docs: every command block of README.md and docs/, as written"
	local bin mlv
	bin=$(mktemp -d)/sextant
	go build -o "$bin" ./cmd/sextant || { fail "build"; return; }
	if mlv=$(ml_venv); then
		env MLFLOW_DISABLE_TELEMETRY=true DO_NOT_TRACK=true HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 SEXTANT_BIN="$bin" \
			"$mlv/bin/python" -m pytest tests/docs -q -p no:cacheprovider || fail "docs"
	else
		fail "install the ML test stack"
	fi
	rm -rf "$(dirname "$bin")"
}

case "$WHAT" in
all) run_go; run_e2e; run_ui; run_docs ;;
go) run_go ;;
e2e) run_e2e ;;
ui) run_ui ;;
docs) run_docs ;;
*) echo "usage: $0 [all|go|e2e|ui|docs]" >&2; exit 2 ;;
esac

echo
if [ ${#failed[@]} -gt 0 ]; then
	printf 'FAILED: %s\n' "${failed[@]}"
	exit 1
fi
echo "all test suites passed"
