# Sourced by make demo, make bench and .ci/run: installs PostgreSQL's server
# binaries (and curl, psql) from Debian's packages when they are missing.
pgq_missing=
if ! { command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir 2>/dev/null)/initdb" ]; } &&
   ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  pgq_missing="postgresql postgresql-contrib"
fi
command -v psql >/dev/null 2>&1 || pgq_missing="$pgq_missing postgresql-client"
command -v curl >/dev/null 2>&1 || pgq_missing="$pgq_missing curl"
if [ -n "$pgq_missing" ]; then
  echo "==> installing from Debian's packages:$pgq_missing"
  pgq_sudo=; [ "$(id -u)" -eq 0 ] || pgq_sudo=sudo
  $pgq_sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $pgq_sudo apt-get install -y -qq $pgq_missing >/dev/null
fi
