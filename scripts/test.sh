#!/usr/bin/env bash
# The README's test command (`npm test`): type check + lint, unit tests and every API test on the
# embedded database (PGlite) and on PostgreSQL, all at once: type check and unit tests in the
# background, the API files of both databases from one pool of file slots, longest first
# (test/support/run-files.ts). Each phase's output goes to a log of its own (.tmp/test-logs/); the
# console gets one line per file, the whole output of what failed, each phase's start and end, the
# slowest files and "N passed, N failed". Starts PostgreSQL, Redis and MariaDB when not running.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-all}"
export TEST_PG_URL="${TEST_PG_URL:-postgres://postgres@127.0.0.1:5432}"
# API test files at once, both databases' files together. 4 on 2 cores: the files wait on timers,
# child processes, PostgreSQL and polling much of the time (docs/decisions.md, the suite's wall time);
# run-files.ts starts more (up to TEST_MAX_CONCURRENCY, 8) while a quarter of the cores stay idle (#231).
concurrency="${TEST_CONCURRENCY:-4}"
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

# Every Debian package the whole suite uses that is missing, in ONE apt-get (a fresh machine's first
# run: one index update instead of one per package group). The ensure_* functions below then find them.
ensure_packages() {
  local missing=()
  [ -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ] || missing+=(chromium)
  [ -x /usr/sbin/nginx ] || missing+=(nginx)
  [ -x /usr/sbin/php-fpm8.2 ] || missing+=(php8.2-fpm)
  [ -x /usr/bin/php8.2 ] || missing+=(php8.2-cli)
  [ -f /usr/share/wordpress/wp-settings.php ] || missing+=(wordpress)
  # grep reads the whole list (`grep -q` would stop at the match; PHP, writing a line at a time, then
  # dies of SIGPIPE and pipefail calls the module missing: an apt-get for nothing, seen in session 19).
  { [ -x /usr/bin/php8.2 ] && php8.2 -m 2>/dev/null | grep -x mysqli >/dev/null; } || missing+=(php8.2-mysql)
  [ -x /usr/bin/pebble ] || missing+=(pebble)
  [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  { [ -x /usr/bin/ssh ] && [ -x /usr/bin/sftp ]; } || missing+=(openssh-client)
  [ -x /usr/bin/curl ] || missing+=(curl)
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "Installing Debian packages the tests use: ${missing[*]}"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "Missing ${missing[*]}: install them with apt-get" >&2
    return 1
  fi
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
# php8.2-fpm and wordpress from the test file's own HOSTING_ROOT (never the system services); the
# fleet's (issue 30, test/api/fleet-netns.test.ts) run them in network namespaces (iproute2's `ip`).
# Whatever is missing comes in one apt-get.
ensure_web() {
  local missing=()
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
  [ -x /usr/sbin/nginx ] || missing+=(nginx)
  [ -x /usr/sbin/php-fpm8.2 ] || missing+=(php8.2-fpm)
  [ -x /usr/bin/php8.2 ] || missing+=(php8.2-cli)
  [ -f /usr/share/wordpress/wp-settings.php ] || missing+=(wordpress)
  php8.2 -m 2>/dev/null | grep -x mysqli >/dev/null || missing+=(php8.2-mysql)
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "Installing Debian packages for the local web tier tests: ${missing[*]}"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "Missing ${missing[*]}: install them (apt-get install ${missing[*]})" >&2
    return 1
  fi
}

# Issue 21: Pebble, the ACME test server (Debian's package), for test/api/local-acme.test.ts.
ensure_pebble() {
  [ -x /usr/bin/pebble ] && return 0
  echo "Installing Debian package for the ACME tests: pebble"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pebble >/dev/null
  else
    echo "Missing pebble: install it (apt-get install pebble)" >&2
    return 1
  fi
}

timings="$(mktemp -d)"
# The tests' temporary files (hosting roots, backups, data dirs, browser profiles) on tmpfs where
# there is one, as the PGlite clones are (docs/decisions.md #253): on a virtual disk mounted with
# `discard`, each file WordPress's copies, backups and restores create and remove cost the kernel
# several times more (hostile-tenant-files: 75 s and 38 CPU-s of its children on /tmp, 19 s and 12 on
# tmpfs). A run's own directory, removed at its end (and those of runs that were killed, at the next).
tmp_dir=""
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
  for stale in /dev/shm/hostplane-tmp-r*; do
    [ -d "$stale" ] || continue
    pid="${stale##*/hostplane-tmp-r}"
    [[ "$pid" =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null && rm -rf "$stale"
  done
  tmp_dir="/dev/shm/hostplane-tmp-r$$"
  # As /tmp: every user may make files there (MariaDB as mysql, a tool as an install user), sticky.
  mkdir -p -m 1777 "$tmp_dir"
  export TMPDIR="$tmp_dir"
fi
trap 'rm -rf "$timings" ${tmp_dir:+"$tmp_dir"}' EXIT
# This run's logs, one per phase and database (the last day's runs are kept).
logdir=".tmp/test-logs/${TEST_RUN_ID}"
mkdir -p "$logdir"
find .tmp/test-logs -mindepth 1 -maxdepth 1 -mtime +1 -exec rm -rf {} + 2>/dev/null || true
run_start=$(date +%s%3N)

# Each phase's start and end (ms since the epoch), result and load average at its end, one line per
# phase in $timings/phases (the API phases' lines are written by run-files.ts), printed at the end:
# the suite's budget (10 minutes for .ci/run on 2 cores) is kept by watching these.
phase() {
  local name="$1" start status=0
  shift
  start=$(date +%s%3N)
  "$@" || status=$?
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$start" "$(date +%s%3N)" \
    "$([ "$status" -eq 0 ] && echo passed || echo failed)" "$(cut -d ' ' -f 1-3 /proc/loadavg 2>/dev/null)" \
    >>"$timings/phases"
  return "$status"
}

report_times() {
  if [ -s "$timings/phases" ]; then
    echo "== wall time per phase (seconds from the start of the run; they overlap)"
    awk -F '\t' -v t0="$run_start" '{
      printf "%-18s %5.0f -> %5.0f  %5.0f s  %-6s (load average at its end: %s)\n",
        $1, ($2 - t0) / 1000, ($3 - t0) / 1000, ($3 - $2) / 1000, $4, $5 }' "$timings/phases"
    printf '%-18s %5.0f s   (load average at the end: %s)\n' "total" \
      $((($(date +%s%3N) - run_start) / 1000)) "$(cut -d ' ' -f 1-3 /proc/loadavg 2>/dev/null)"
    # The CPU of every process this run started and waited for (the daemons it started are not in it).
    times >"$timings/times"
    echo "CPU of the run's own processes: $(tail -n 1 "$timings/times") (user, system)"
    [ -s "$timings/speed" ] && echo "the machine at the start of the run (scripts/machine-speed.mjs): $(cat "$timings/speed")"
  fi
  [ -s "$timings/files" ] || return 0
  for db in pglite postgres; do
    grep -q "	${db}	" "$timings/files" || continue
    echo "-- slowest test files on ${db} (wall s, CPU s of the test process, of its children, result, file)"
    awk -F '\t' -v db="$db" '$4 == db { printf "%6s %6s %6s  %s  %s\n", $1, $2, $6, $3, $5 }' "$timings/files" |
      sort -rn | awk -v top="${TEST_TIMINGS_TOP:-15}" 'NR <= top'
    # (awk reads sort's whole output: `head` exiting after its lines could kill sort with SIGPIPE
    # while it still writes, and under pipefail and errexit that ended `npm test` with 141 after
    # every test had passed.)
    awk -F '\t' -v db="$db" '$4 == db { own += $2; kids += $6 } END {
      printf "   (all files on %s: %.0f CPU s in the test processes, %.0f in their children)\n", db, own, kids }' \
      "$timings/files"
  done
  echo "(logs: ${logdir})"
}

# The closing line: every test of every run, in the plain "N passed, N failed" form (a cancelled
# test, e.g. one that timed out, counts as failed).
summary() {
  local passed failed
  passed=$(cat "$logdir"/*.log 2>/dev/null | grep -E '^(ℹ|#) pass [0-9]+' | awk '{s+=$3} END {print s+0}')
  failed=$(cat "$logdir"/*.log 2>/dev/null | grep -E '^(ℹ|#) (fail|cancelled) [0-9]+' | awk '{s+=$3} END {print s+0}')
  echo "${passed} passed, ${failed} failed"
}

# The unit tests (src/**/*.test.ts, test/unit/) as compiled by compile_tests: no loader hooks in their
# processes (tsx's cost ~0.3 CPU-s per file; docs/decisions.md #121), one file at a time, each a
# process that run-files.ts watches (a process hung in node's teardown, seen once, is killed).
run_unit() {
  mapfile -t files < <(find src test/unit -name '*.test.ts' 2>/dev/null | sort)
  [ "${#files[@]}" -eq 0 ] && return 0
  TEST_CONCURRENCY=1 TEST_MAX_CONCURRENCY=1 TEST_LOG_DIR="$logdir" node --import tsx test/support/run-files.ts --db none "${files[@]}"
}

# The test processes run JavaScript compiled from src/ and test/ (scripts/compile-tests.mjs, about a
# second): compiled once per run, before any phase reads it (run-files.ts compiles only when run alone).
compile_tests() {
  node scripts/compile-tests.mjs
  export TEST_COMPILED=1
}

# A phase in the background with its output in its own log (printed whole when it fails).
background() {
  local name="$1" log="$logdir/$2.log"
  shift 2
  (
    status=0
    phase "$name" "$@" >"$log" 2>&1 || status=$?
    if [ "$status" -eq 0 ]; then
      echo "✔ ${name} passed (log: ${log})"
    else
      echo "✖ ${name} FAILED; its output:"
      cat "$log"
    fi
    exit "$status"
  ) &
}

# Process tests run the compiled CLI (test/support/process.ts), as `npm start` does: build it once
# here when the sources changed since the last build (npm ci builds it through `prepare`).
ensure_build() {
  if [ ! -f dist/.build-stamp ] ||
    [ -n "$(find src drizzle tsconfig.json -newer dist/.build-stamp -print -quit)" ]; then
    echo "compiling: the sources changed since the last build"
    npm run --silent build
  fi
  # The web console (issue 23) its browser test serves: rebuilt here, before the phases, never while
  # the API phase reads it (vite empties dist/ first).
  local page=packages/console/dist/index.html
  if [ ! -f "$page" ] ||
    [ -n "$(find packages/console/src packages/console/index.html packages/client/src -newer "$page" -print -quit)" ]; then
    echo "building the console: its sources changed since the last build"
    npx tsc -b packages/client && npm run --silent build -w @hostplane/console
  fi
}

# The packages (issue 23: packages/client, packages/cli) against a real server they start on PGlite.
run_packages() {
  mapfile -t files < <(find packages -path '*/node_modules' -prune -o -path '*/test/*.test.ts' -print | sort)
  [ "${#files[@]}" -eq 0 ] && return 0
  # tsc only: the console was built by ensure_build (it runs while the API phase serves it).
  ensure_build && npx tsc -b packages/client packages/cli || return 1
  node --import tsx --test --test-reporter=spec "${files[@]}"
}

# run_api "pglite postgres" [FILE...]: the files (default all of test/api) on each database named,
# from one pool of TEST_CONCURRENCY slots (test/support/run-files.ts).
run_api() {
  local dbs="$1" db status=0
  shift
  # Called in `... ||` (no errexit there): each step's failure is returned by hand.
  ensure_build || return 1
  if [ "$#" -gt 0 ]; then files=("$@"); else mapfile -t files < <(find test/api -name '*.test.ts' | sort); fi
  echo "== API tests on ${dbs// / and }: ${#files[@]} files each, ${concurrency} at once"
  local pids=() db_args=()
  for db in $dbs; do
    TEST_DB="$db" node --import tsx test/support/prepare.ts &
    pids+=($!)
    db_args+=(--db "$db")
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  [ "$status" -eq 0 ] || return 1
  TEST_CONCURRENCY="$concurrency" TEST_LOG_DIR="$logdir" TEST_TIMINGS="$timings/files" \
    TEST_PHASES="$timings/api" node --import tsx test/support/run-files.ts "${db_args[@]}" "${files[@]}" ||
    status=$?
  for db in $dbs; do TEST_DB="$db" node --import tsx test/support/prepare.ts drop || true; done
  # Each database's own start and end, as a phase of the report.
  [ -s "$timings/api" ] && awk -F '\t' '{ printf "API on %s\t%s\t%s\t%s\t%s\n", $1, $2, $3, $4, $5 }' \
    "$timings/api" >>"$timings/phases"
  return "$status"
}

finish() {
  local status="$1"
  report_times
  summary
  exit "$status"
}

[ "$mode" = packages ] || compile_tests

case "$mode" in
  all)
    # Before anything loads the machine: what its CPU and its forks cost (printed with the phases).
    node scripts/machine-speed.mjs >"$timings/speed" 2>&1 || true
    ensure_packages
    ensure_redis
    ensure_mariadb
    ensure_chromium
    ensure_web
    ensure_pebble
    status=0
    # Type check + lint and the unit tests use the cores while the API files start (most of the
    # first files' time is spent waiting on processes, PostgreSQL and timers).
    background "typecheck + lint" typecheck bash -c 'npm run --silent typecheck && npm run --silent lint'
    typecheck_pid=$!
    background unit unit run_unit
    unit_pid=$!
    # One build (the process tests' CLI, the packages' server) before the phases that use it.
    ensure_build || status=1
    background packages packages run_packages
    packages_pid=$!
    run_api "pglite postgres" || status=$?
    wait "$typecheck_pid" || status=1
    wait "$unit_pid" || status=1
    wait "$packages_pid" || status=1
    finish "$status"
    ;;
  unit) run_unit ;;
  packages) run_packages ;;
  api | files)
    # Some API test files on both databases: scripts/test.sh files test/api/a.test.ts ...
    [ "$mode" = files ] && shift || set --
    ensure_redis
    ensure_postgres
    if [ "$mode" = api ] || [[ " $* " =~ (local|hostile|sftp|ssh|fleet|browser|acme) ]]; then ensure_packages; fi
    if [ "$mode" = api ] || [[ " $* " == *browser* ]]; then ensure_chromium; fi
    if [ "$mode" = api ] || [[ " $* " == *local* ]] || [[ " $* " == *drivers* ]] || [[ " $* " == *hostile-tenant* ]] || [[ " $* " == *fleet-netns* ]]; then ensure_mariadb; fi
    if [ "$mode" = api ] || [[ " $* " == *local-web* ]] || [[ " $* " == *local-acme* ]] || [[ " $* " == *hostile-tenant* ]] || [[ " $* " == *fleet-netns* ]]; then ensure_web; fi
    if [ "$mode" = api ] || [[ " $* " == *local-acme* ]]; then ensure_pebble; fi
    status=0
    run_api "pglite postgres" "$@" || status=$?
    finish "$status"
    ;;
  pglite)
    ensure_packages
    ensure_redis
    ensure_mariadb
    ensure_chromium
    ensure_web
    ensure_pebble
    run_api pglite
    ;;
  postgres | postgres-files)
    # postgres-files: some API test files on PostgreSQL only (the long reliability run: npm run test:reliability).
    [ "$mode" = postgres-files ] && shift || set --
    ensure_redis
    ensure_mariadb
    ensure_postgres
    if [ "$mode" = postgres ] || [[ " $* " =~ (local|hostile|sftp|ssh|fleet|browser|acme) ]]; then ensure_packages; fi
    if [[ " $* " == *local-web* ]] || [[ " $* " == *local-acme* ]] || [[ " $* " == *fleet-netns* ]]; then ensure_web; fi
    if [[ " $* " == *local-acme* ]]; then ensure_pebble; fi
    status=0
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
