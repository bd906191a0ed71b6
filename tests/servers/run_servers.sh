#!/usr/bin/env bash
# run_servers.sh — start or stop the servers of rangeio's HTTP/S3 tests.
#
#   eval "$(tests/servers/run_servers.sh start STATE_DIR)"   # exports the vars
#   ctest --test-dir build                                   # http tests run
#   tests/servers/run_servers.sh stop STATE_DIR
#
# start: runs, on free loopback ports, with everything under STATE_DIR:
#   nginx            serving STATE_DIR/data (written by seed.js), over
#                    http and over https (self-signed, HTTP/2);
#   s3rver           (pinned in package.json; `npm ci` here first; started by
#                    s3rver_main.js) with the bucket rangeio-test holding the
#                    seeded keys;
#   faultproxy.js    its control API (tests make their own listeners);
#   rangeio-latency-relay (latency_relay.cc here, built in the build tree)
#                    three times in front of nginx for the benchmarks:
#                    lognormal latency (median 24 ms, sigma 0.3), none, and
#                    that lognormal with 1% of requests 10x slower;
#   a Ceph cluster   (ceph_rgw.sh, under STATE_DIR/ceph: a monitor, a memstore
#                    OSD and radosgw) when Debian's ceph-mon, ceph-osd,
#                    radosgw and ceph-common are installed and
#                    RANGEIO_TEST_RGW is not 'off': the bucket rangeio-test
#                    with the same keys as s3rver's, plus the benchmarks'
#                    objects, and a third relay (24 ms) in front of it.
# It prints `export NAME=VALUE` lines and writes them to STATE_DIR/servers.env:
#   RANGEIO_TEST_NGINX            http://127.0.0.1:PORT (root: data dir)
#   RANGEIO_TEST_NGINX_ROOT       the data dir (tests may add files)
#   RANGEIO_TEST_NGINX_TLS        https://127.0.0.1:PORT (HTTP/2 offered,
#                                 self-signed certificate)
#   RANGEIO_TEST_TLS_CA           that certificate (PEM)
#   RANGEIO_TEST_S3_ENDPOINT      http://127.0.0.1:PORT (s3rver)
#   RANGEIO_TEST_S3_VHOST_ENDPOINT http://s3.localhost:PORT (for virtual-
#                                 hosted style: BUCKET.s3.localhost)
#   RANGEIO_TEST_S3_BUCKET        rangeio-test
#   RANGEIO_TEST_PROXY_CONTROL    http://127.0.0.1:PORT (faultproxy API)
#   RANGEIO_BENCH_HTTP_URL        bench.bin through the 24 ms listener
#   RANGEIO_BENCH_HTTP_CAPACITY_URL  bench.bin through the no-latency one
#   RANGEIO_BENCH_PROXY_PIDS      the 24 ms relay's process (CPU cost)
# and with the Ceph cluster (see ceph_rgw.sh):
#   RANGEIO_TEST_RGW_ENDPOINT, RANGEIO_TEST_RGW_VHOST_ENDPOINT,
#   RANGEIO_TEST_RGW_ACCESS_KEY, RANGEIO_TEST_RGW_SECRET_KEY
#   RANGEIO_BENCH_RGW_ENDPOINT    RGW through the 24 ms relay (the bucket
#                                 holds bench.bin, 64 MiB, and blob-bench/)
#   RANGEIO_BENCH_S3_PROXY_PIDS  that relay's process
#   RANGEIO_BENCH_HTTP_STRAGGLER_URL  bench.bin through the mixture one
#                                 (bench hedge)
#   RANGEIO_BENCH_HTTP_THROTTLED_URL  bench.bin through a 24 ms relay rate
#                                 limited at 800 requests/s, 503 SlowDown
#                                 above it (bench throttle)
# stop: ends the processes that start recorded in STATE_DIR/pids.
#
# The relay comes from the build tree $RANGEIO_BUILD_DIR (default: build/ in
# the repo), so build first (.ci/run starts the servers after its release
# build).
set -euo pipefail

readonly HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly BUCKET=rangeio-test
readonly BUILD_DIR=${RANGEIO_BUILD_DIR:-$HERE/../../build}
readonly RELAY=$BUILD_DIR/tests/servers/rangeio-latency-relay

# shellcheck source=tests/servers/lib.sh
source "$HERE/lib.sh"

# wait_until PID NAME WHAT TEST...: until TEST succeeds (10 s), failing
# early when PID exits. WHAT says what NAME did not do in time.
wait_until() {
  local pid=$1 name=$2 what=$3
  shift 3
  for _ in $(seq 100); do
    "$@" && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "run_servers: $name exited while starting" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "run_servers: $name $what within 10 s" >&2
  return 1
}

accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_for_port PORT PID NAME: until PORT accepts connections.
wait_for_port() {
  wait_until "$2" "$3" "did not listen on port $1" accepts "$1"
}

# wait_for_file FILE PID NAME: until FILE is non-empty.
wait_for_file() {
  wait_until "$2" "$3" "wrote no port to $1" test -s "$1"
}

start_nginx() {
  local state=$1 port tls_port pid user_line=""
  mkdir -p "$state/nginx/tmp"
  [[ $(id -u) -eq 0 ]] && user_line="user root;"
  # A self-signed certificate for the TLS server (valid 2 days): the tests
  # check that it is refused by default and accepted given as the CA.
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
    -keyout "$state/nginx/tls.key" -out "$state/nginx/tls.crt" 2>/dev/null
  for _ in 1 2 3 4 5; do
    port=$(free_port)
    tls_port=$(free_port)
    sed -e "s|@PORT@|$port|g" -e "s|@TLS_PORT@|$tls_port|g" \
      -e "s|@ROOT@|$state/data|g" -e "s|@CERT@|$state/nginx/tls.crt|g" \
      -e "s|@KEY@|$state/nginx/tls.key|g" \
      -e "s|^daemon off;|daemon off;\n$user_line|" \
      "$HERE/nginx.conf.in" >"$state/nginx/nginx.conf"
    nginx -p "$state/nginx/" -c "$state/nginx/nginx.conf" \
      >"$state/nginx/stdout.log" 2>&1 &
    pid=$!
    echo "$pid" >>"$state/pids"
    if wait_for_port "$port" "$pid" nginx 2>/dev/null &&
      wait_for_port "$tls_port" "$pid" nginx 2>/dev/null; then
      NGINX_PORT=$port
      NGINX_TLS_PORT=$tls_port
      return 0
    fi
  done
  echo "run_servers: nginx did not start; see $state/nginx/error.log" >&2
  cat "$state/nginx/stdout.log" >&2
  return 1
}

start_s3rver() {
  local state=$1 pid
  mkdir -p "$state/s3"
  : >"$state/s3rver.log"
  node "$HERE/s3rver_main.js" --dir "$state/s3" --port 0 --bucket "$BUCKET" \
    >"$state/s3rver.log" 2>&1 &
  pid=$!
  echo "$pid" >>"$state/pids"
  for _ in $(seq 100); do
    S3_PORT=$(sed -n 's/.*listening on .*:\([0-9][0-9]*\).*/\1/p' "$state/s3rver.log")
    [[ -n $S3_PORT ]] && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "run_servers: s3rver did not start:" >&2
  cat "$state/s3rver.log" >&2
  return 1
}

# start_listener STATE NAME COMMAND...: runs COMMAND --port-file FILE (the
# fault proxy or the latency relay; both write the port they listen on to
# FILE) and waits until it listens. Sets LISTENER_PORT and LISTENER_PID.
start_listener() {
  local state=$1 name=$2
  shift 2
  rm -f "$state/$name.port"
  "$@" --port-file "$state/$name.port" >"$state/$name.log" 2>&1 &
  LISTENER_PID=$!
  echo "$LISTENER_PID" >>"$state/pids"
  wait_for_file "$state/$name.port" "$LISTENER_PID" "$name"
  LISTENER_PORT=$(cat "$state/$name.port")
  wait_for_port "$LISTENER_PORT" "$LISTENER_PID" "$name"
}

# Whether to start the Ceph cluster: RANGEIO_TEST_RGW=on requires it,
# off skips it, unset starts it when radosgw is installed.
want_rgw() {
  case ${RANGEIO_TEST_RGW:-auto} in
    off) return 1 ;;
    on) return 0 ;;
  esac
  command -v radosgw >/dev/null && return 0
  echo "run_servers: radosgw is not installed: no Ceph RGW (its tests skip;" \
    "apt-get install ceph-mon ceph-osd radosgw ceph-common)" >&2
  return 1
}

# start_rgw STATE: the Ceph cluster, its bucket and objects, and the relay in
# front of it; sets RGW_ENV to the export lines. Records the relay in
# STATE/pids (the Ceph daemons are ceph_rgw.sh's to stop).
start_rgw() {
  local state=$1 env
  env=$("$HERE/ceph_rgw.sh" start "$state/ceph")
  eval "$env"
  # 64 MiB for bench.bin: 64 slots of bench http's 1 MiB stride, in the
  # OSD's memory (memstore).
  node "$HERE/seed.js" --s3 "$RANGEIO_TEST_RGW_ENDPOINT" --bucket "$BUCKET" \
    --access-key "$RANGEIO_TEST_RGW_ACCESS_KEY" \
    --secret-key "$RANGEIO_TEST_RGW_SECRET_KEY" --create-bucket 1 \
    --bench-mib 64
  local port=${RANGEIO_TEST_RGW_ENDPOINT##*:}
  start_listener "$state" relay-rgw "$RELAY" --listen 0 \
    --upstream "127.0.0.1:$port" \
    --latency '{"kind":"lognormal","median_ms":24,"sigma":0.3}'
  RGW_ENV="$env
export RANGEIO_BENCH_RGW_ENDPOINT=http://127.0.0.1:$LISTENER_PORT
export RANGEIO_BENCH_S3_PROXY_PIDS=$LISTENER_PID"
}

start() {
  local state=$1
  if [[ ! -x $RELAY ]]; then
    echo "run_servers: the latency relay $RELAY is not built: build rangeio" \
      "first (cmake --build build), or set RANGEIO_BUILD_DIR to the build tree" >&2
    exit 1
  fi
  if [[ ! -d $HERE/node_modules/s3rver ]]; then
    echo "run_servers: s3rver is not installed: run 'npm ci' in $HERE" >&2
    exit 1
  fi
  command -v nginx >/dev/null || {
    echo "run_servers: nginx is not installed (apt-get install nginx-light)" >&2
    exit 1
  }
  mkdir -p "$state"
  state=$(cd "$state" && pwd)
  stop "$state"  # whatever an earlier start left running there
  : >"$state/pids"
  # On any failure (set -e may exit from inside a helper function, where an
  # ERR trap would not run), stop what was started.
  STARTING=$state
  trap 'rc=$?; ((rc == 0)) || stop "$STARTING"; exit "$rc"' EXIT

  start_nginx "$state"
  start_s3rver "$state"
  node "$HERE/seed.js" --data "$state/data" \
    --s3 "http://127.0.0.1:$S3_PORT" --bucket "$BUCKET"
  start_listener "$state" proxy-control node "$HERE/faultproxy.js" \
    --control-port 0
  local control=$LISTENER_PORT
  # The benchmarks' relays: one process each, single-threaded (at ~2,300
  # requests/s it needs a fraction of a core; `rangeio-bench http` reports
  # its CPU per request from RANGEIO_BENCH_PROXY_PIDS).
  start_listener "$state" relay-bench "$RELAY" --listen 0 \
    --upstream "127.0.0.1:$NGINX_PORT" \
    --latency '{"kind":"lognormal","median_ms":24,"sigma":0.3}'
  local bench=$LISTENER_PORT bench_pid=$LISTENER_PID
  start_listener "$state" relay-capacity "$RELAY" --listen 0 \
    --upstream "127.0.0.1:$NGINX_PORT" --latency '{"kind":"none"}'
  local capacity=$LISTENER_PORT
  local rgw_env=""
  if want_rgw; then
    start_rgw "$state"
    rgw_env=$RGW_ENV
  fi
  start_listener "$state" relay-straggler "$RELAY" --listen 0 \
    --upstream "127.0.0.1:$NGINX_PORT" \
    --latency '{"kind":"mixture","median_ms":24,"sigma":0.3,"p":0.01,"factor":10}'
  local straggler=$LISTENER_PORT
  start_listener "$state" relay-throttled "$RELAY" --listen 0 \
    --upstream "127.0.0.1:$NGINX_PORT" --rate-limit 800 \
    --latency '{"kind":"lognormal","median_ms":24,"sigma":0.3}'
  local throttled=$LISTENER_PORT
  trap - EXIT

  cat >"$state/servers.env" <<EOF
export RANGEIO_TEST_NGINX=http://127.0.0.1:$NGINX_PORT
export RANGEIO_TEST_NGINX_ROOT=$state/data
export RANGEIO_TEST_NGINX_TLS=https://127.0.0.1:$NGINX_TLS_PORT
export RANGEIO_TEST_TLS_CA=$state/nginx/tls.crt
export RANGEIO_TEST_S3_ENDPOINT=http://127.0.0.1:$S3_PORT
export RANGEIO_TEST_S3_VHOST_ENDPOINT=http://s3.localhost:$S3_PORT
export RANGEIO_TEST_S3_BUCKET=$BUCKET
export RANGEIO_TEST_PROXY_CONTROL=http://127.0.0.1:$control
export RANGEIO_BENCH_HTTP_URL=http://127.0.0.1:$bench/bench.bin
export RANGEIO_BENCH_HTTP_CAPACITY_URL=http://127.0.0.1:$capacity/bench.bin
export RANGEIO_BENCH_PROXY_PIDS=$bench_pid
export RANGEIO_BENCH_HTTP_STRAGGLER_URL=http://127.0.0.1:$straggler/bench.bin
export RANGEIO_BENCH_HTTP_THROTTLED_URL=http://127.0.0.1:$throttled/bench.bin
EOF
  [[ -z $rgw_env ]] || echo "$rgw_env" >>"$state/servers.env"
  cat "$state/servers.env"
}

stop() {
  local state=$1 pid
  if [[ -d $state/ceph ]]; then "$HERE/ceph_rgw.sh" stop "$state/ceph"; fi
  [[ -f $state/pids ]] || return 0
  while read -r pid; do
    [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null || true
  done <"$state/pids"
  # Wait (5 s at most) for each to exit, so ports and files are free after.
  while read -r pid; do
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  done <"$state/pids"
  rm -f "$state/pids"
}

[[ $# -eq 2 ]] || usage
case $1 in
  start) start "$2" ;;
  stop) stop "$2" ;;
  *) usage ;;
esac
