#!/usr/bin/env bash
# Prints the path of a MinIO server binary for the S3 tests of internal/blob,
# building it once from the Go module proxy if it is not cached yet.
#
#   ./scripts/minio.sh           print the path (build first if needed)
#
# The binary is cached outside the clone, keyed by the pinned version, in
#   ${SEXTANT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sextant}/minio/<version>/minio
# The build takes about five minutes on two cores. It goes into a temporary
# directory next to the cache entry and is moved into place only when
# complete, so an interrupted build never leaves a broken binary behind, and
# concurrent callers wait for one another (flock) instead of building twice.
#
# Only the path goes to standard output; progress and errors go to standard
# error. Exits non-zero, with a message, when the build fails.
set -euo pipefail

MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
CACHE=${SEXTANT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sextant}
DIR="$CACHE/minio/$MINIO_VERSION"
BIN="$DIR/minio"

if [ -x "$BIN" ]; then
	echo "$BIN"
	exit 0
fi

mkdir -p "$CACHE/minio"
exec 9>"$CACHE/minio/.lock"
if command -v flock >/dev/null 2>&1 && ! flock -n 9; then
	echo "minio.sh: another build is running; waiting for its lock $CACHE/minio/.lock" >&2
	flock 9
fi
# Another caller may have finished the build while we waited.
if [ -x "$BIN" ]; then
	echo "$BIN"
	exit 0
fi

if ! command -v go >/dev/null 2>&1; then
	echo "minio.sh: go is not on PATH; it is needed to build MinIO" >&2
	exit 1
fi

tmp=$(mktemp -d "$CACHE/minio/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "minio.sh: building github.com/minio/minio@$MINIO_VERSION into $DIR (about 5 minutes, cached for later runs)" >&2
# GOFLAGS is reset so that a caller's -mod or -tags cannot break the build;
# CGO is off because the server does not need it and it builds faster.
if ! GOBIN="$tmp/bin" GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
	go install "github.com/minio/minio@$MINIO_VERSION" >&2; then
	echo "minio.sh: building MinIO failed (see the go output above)." >&2
	echo "minio.sh: it needs the Go module proxy; or point the tests at a running server with SEXTANT_TEST_S3_ENDPOINT, or set SEXTANT_TEST_S3=off." >&2
	exit 1
fi
if [ ! -x "$tmp/bin/minio" ]; then
	echo "minio.sh: go install succeeded but produced no minio binary in $tmp/bin" >&2
	exit 1
fi
rm -rf "$DIR"
mv "$tmp/bin" "$DIR"
echo "$BIN"
