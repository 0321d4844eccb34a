#!/usr/bin/env bash
# The README's test command (`npm test`): type check, lint, unit tests, then every API test on the
# embedded database (PGlite) and on PostgreSQL. Starts PostgreSQL when it is not running.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-all}"
export TEST_PG_URL="${TEST_PG_URL:-postgres://postgres@127.0.0.1:5432}"
# API test files at once. 3 on 2 cores: the files wait on timers, child processes and polling much
# of the time, so a third keeps the cores busy (docs/decisions.md, the suite's wall time).
concurrency="${TEST_CONCURRENCY:-3}"
export TEST_RUN_ID="${TEST_RUN_ID:-r$$}"

ensure_postgres() {
  if pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then return 0; fi
  echo "PostgreSQL is not answering on 127.0.0.1:5432; starting it"
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    else
      echo "PostgreSQL is not installed; install it or set TEST_PG_URL" >&2
      return 1
    fi
  fi
  version="$(ls /etc/postgresql | sort -V | tail -n 1)"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 1 30); do
    pg_isready -h 127.0.0.1 -p 5432 -q && return 0
    sleep 1
  done
  echo "PostgreSQL did not start" >&2
  return 1
}

# The rate-limit tests share counters through a real Redis (TEST_REDIS_URL overrides the address).
ensure_redis() {
  [ -n "${TEST_REDIS_URL:-}" ] && return 0
  if (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then return 0; fi
  echo "Redis is not answering on 127.0.0.1:6379; starting it"
  if ! command -v redis-server >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    else
      echo "Redis is not installed; install it or set TEST_REDIS_URL" >&2
      return 1
    fi
  fi
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /tmp --logfile /tmp/hostplane-test-redis.log
  for _ in $(seq 1 30); do
    (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && return 0
    sleep 0.2
  done
  echo "Redis did not start" >&2
  return 1
}

# The local hosting driver's tests (issue 16) use the MariaDB server on 127.0.0.1:3306 as root with
# no password (TEST_MARIADB_URL overrides it). Debian's mariadb-server, started as a daemon.
ensure_mariadb() {
  [ -n "${TEST_MARIADB_URL:-}" ] && return 0
  if (exec 3<>/dev/tcp/127.0.0.1/3306) 2>/dev/null; then return 0; fi
  echo "MariaDB is not answering on 127.0.0.1:3306; starting it"
  if [ ! -x /usr/sbin/mariadbd ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null
    else
      echo "MariaDB is not installed; install Debian's mariadb-server or set TEST_MARIADB_URL" >&2
      return 1
    fi
  fi
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
  [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- \
    --user=mysql --bind-address=127.0.0.1 --port=3306
  for _ in $(seq 1 60); do
    (exec 3<>/dev/tcp/127.0.0.1/3306) 2>/dev/null && return 0
    sleep 0.5
  done
  echo "MariaDB did not start" >&2
  return 1
}

# The site report browser test renders a report in Debian's chromium (CHROMIUM_PATH overrides it).
ensure_chromium() {
  local chromium="${CHROMIUM_PATH:-/usr/bin/chromium}"
  [ -x "$chromium" ] && return 0
  echo "Chromium is not installed at ${chromium}; installing Debian's chromium"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "Chromium is missing; install Debian's chromium package or set CHROMIUM_PATH" >&2
    return 1
  fi
}

# The local driver's web tier tests (issue 21, test/api/local-web.test.ts) run Debian's nginx,
# php8.2-fpm and wordpress from the test file's own HOSTING_ROOT (never the system services).
ensure_web() {
  local missing=()
  [ -x /usr/sbin/nginx ] || missing+=(nginx)
  [ -x /usr/sbin/php-fpm8.2 ] || missing+=(php8.2-fpm)
  [ -x /usr/bin/php8.2 ] || missing+=(php8.2-cli)
  [ -f /usr/share/wordpress/wp-settings.php ] || missing+=(wordpress)
  php8.2 -m 2>/dev/null | grep -qx mysqli || missing+=(php8.2-mysql)
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "Installing Debian packages for the local web tier tests: ${missing[*]}"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      nginx php8.2-fpm php8.2-mysql php8.2-cli wordpress >/dev/null
  else
    echo "Missing ${missing[*]}: install them (apt-get install nginx php8.2-fpm php8.2-mysql php8.2-cli wordpress)" >&2
    return 1
  fi
}

log="$(mktemp)"
timings="$(mktemp -d)"
trap 'rm -rf "$log" "$timings"' EXIT

# Wall time of each phase (unit, API per database), printed at the end: the suite's budget is kept
# by watching these (CI must stay well under 15 minutes on 2 cores).
phase_times=()
timed() {
  local name="$1" start=$SECONDS status=0
  shift
  "$@" || status=$?
  phase_times+=("$(printf '%-18s %4d s   (load average at its end: %s)' "$name" $((SECONDS - start)) \
    "$(cut -d ' ' -f 1-3 /proc/loadavg 2>/dev/null)")")
  return "$status"
}

# Per file wall times of a phase (test/support/run-files.ts), the slowest first.
slowest_files() {
  local file="$timings/$1"
  [ -s "$file" ] || return 0
  echo "-- slowest test files on $1 (s, result, file)"
  sort -rn "$file" | head -n "${TEST_TIMINGS_TOP:-15}"
}

report_times() {
  if [ "${#phase_times[@]}" -gt 0 ]; then
    echo "== wall time per phase"
    printf '%s\n' "${phase_times[@]}"
  fi
  for db in pglite postgres; do slowest_files "$db"; done
}

# The closing line: every test of every run, in the plain "N passed, N failed" form.
summary() {
  local passed failed
  passed=$(grep -E '^(ℹ|#) pass [0-9]+' "$log" | awk '{s+=$3} END {print s+0}')
  failed=$(grep -E '^(ℹ|#) fail [0-9]+' "$log" | awk '{s+=$3} END {print s+0}')
  echo "${passed} passed, ${failed} failed"
}

run_unit() {
  mapfile -t files < <(find src test/unit -name '*.test.ts' 2>/dev/null | sort)
  [ "${#files[@]}" -eq 0 ] && return 0
  echo "== unit tests"
  node --import tsx --test --test-reporter=spec "${files[@]}" 2>&1 | tee -a "$log"
  return "${PIPESTATUS[0]}"
}

# Process tests run the compiled CLI (test/support/process.ts), as `npm start` does: build it once
# here when the sources changed since the last build (npm ci builds it through `prepare`).
ensure_build() {
  if [ ! -f dist/.build-stamp ] ||
    [ -n "$(find src drizzle tsconfig.build.json -newer dist/.build-stamp -print -quit)" ]; then
    echo "compiling: the sources changed since the last build"
    npm run --silent build
  fi
}

# The packages (issue 23: packages/client, packages/cli) against a real server they start on PGlite.
run_packages() {
  mapfile -t files < <(find packages -path '*/node_modules' -prune -o -path '*/test/*.test.ts' -print | sort)
  [ "${#files[@]}" -eq 0 ] && return 0
  ensure_build && npm run --silent build:packages || return 1
  echo "== package tests"
  node --import tsx --test --test-reporter=spec "${files[@]}" 2>&1 | tee -a "$log"
  return "${PIPESTATUS[0]}"
}

run_api() {
  local db="$1"
  shift
  # Called in `timed ... ||` (no errexit there): each step's failure is returned by hand.
  ensure_build || return 1
  if [ "$#" -gt 0 ]; then files=("$@"); else mapfile -t files < <(find test/api -name '*.test.ts' | sort); fi
  echo "== API tests on ${db}"
  TEST_DB="$db" node --import tsx test/support/prepare.ts || return 1
  local status=0
  # node --test with the longest files first (test/support/run-files.ts).
  TEST_DB="$db" TEST_CONCURRENCY="$concurrency" TEST_TIMINGS="$timings/$db" \
    node --import tsx test/support/run-files.ts "${files[@]}" 2>&1 | tee -a "$log" || status=$?
  TEST_DB="$db" node --import tsx test/support/prepare.ts drop || true
  return "$status"
}

case "$mode" in
  all)
    timed "typecheck + lint" bash -c 'npm run --silent typecheck && npm run --silent lint'
    timed unit run_unit
    timed packages run_packages
    ensure_redis
    ensure_mariadb
    ensure_chromium
    ensure_web
    status=0
    timed "API on pglite" run_api pglite || status=$?
    if [ "$status" -eq 0 ]; then
      ensure_postgres
      timed "API on postgres" run_api postgres || status=$?
    fi
    report_times
    summary
    exit "$status"
    ;;
  unit) run_unit ;;
  packages) run_packages ;;
  api)
    ensure_redis
    ensure_mariadb
    ensure_chromium
    ensure_web
    run_api pglite
    ensure_postgres
    run_api postgres
    ;;
  pglite)
    ensure_redis
    ensure_mariadb
    ensure_chromium
    ensure_web
    run_api pglite
    ;;
  postgres)
    ensure_redis
    ensure_mariadb
    ensure_postgres
    run_api postgres
    ;;
  postgres-files)
    # Some API test files on PostgreSQL only (the long reliability run: npm run test:reliability).
    shift
    ensure_redis
    ensure_postgres
    status=0
    run_api postgres "$@" || status=$?
    report_times
    summary
    exit "$status"
    ;;
  files)
    # Some API test files on both databases: scripts/test.sh files test/api/a.test.ts ...
    shift
    ensure_redis
    ensure_postgres
    case " $* " in *browser*) ensure_chromium ;; esac
    case " $* " in *local* | *drivers*) ensure_mariadb ;; esac
    case " $* " in *local-web*) ensure_web ;; esac
    status=0
    run_api pglite "$@" || status=$?
    run_api postgres "$@" || status=$?
    report_times
    summary
    exit "$status"
    ;;
  *)
    echo "usage: scripts/test.sh [all|unit|packages|api|pglite|postgres|files FILE...|postgres-files FILE...]" >&2
    exit 2
    ;;
esac
