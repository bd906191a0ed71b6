#!/usr/bin/env bash
# ceph_rgw.sh — a single-node Ceph cluster with the RADOS Gateway (S3) on
# loopback, for rangeio's S3 tests against a real object store.
#
#   tests/servers/ceph_rgw.sh start STATE_DIR   # prints export lines
#   tests/servers/ceph_rgw.sh stop STATE_DIR
#
# run_servers.sh calls it with STATE_DIR/ceph. start runs, each directly (no
# systemd) in the foreground of a background job, with every file under
# STATE_DIR and its pid in STATE_DIR/run/NAME.pid:
#   ceph-mon  one monitor (mon.a) on a free loopback port;
#   ceph-osd  one OSD on memstore (objects live in its memory: nothing to
#             format, nothing on disk), pools of size 1;
#   radosgw   the beast frontend on 127.0.0.1:PORT, with `rgw dns name` set
#             to s3.localhost so that BUCKET.s3.localhost is virtual-hosted.
# No ceph-mgr: RGW and the OSD do not need one. Authentication between the
# daemons is off (auth ... required = none); RGW still checks every S3
# request's SigV4 signature against its users' secrets.
# Then it creates an S3 user with fresh keys and prints:
#   RANGEIO_TEST_RGW_ENDPOINT        http://127.0.0.1:PORT
#   RANGEIO_TEST_RGW_VHOST_ENDPOINT  http://s3.localhost:PORT
#   RANGEIO_TEST_RGW_ACCESS_KEY, RANGEIO_TEST_RGW_SECRET_KEY
# (the bucket and its objects are seed.js's work).
#
# Needs Debian's ceph-mon, ceph-osd, radosgw and ceph-common.
set -euo pipefail

# shellcheck source=tests/servers/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_for SECONDS NAME WHAT TEST...: until TEST succeeds, failing early when
# NAME's pid file names a process that has exited.
wait_for() {
  local seconds=$1 name=$2 what=$3 pid
  shift 3
  for _ in $(seq $((seconds * 10))); do
    "$@" && return 0
    pid=$(cat "$STATE/run/$name.pid" 2>/dev/null || true)
    if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
      echo "ceph_rgw: $name exited while starting; see $STATE/log/$name.log" >&2
      tail -n 20 "$STATE/log/$name.log" >&2 || true
      return 1
    fi
    sleep 0.1
  done
  echo "ceph_rgw: $name $what within $seconds s; see $STATE/log/$name.log" >&2
  tail -n 20 "$STATE/log/$name.log" >&2 || true
  return 1
}

# daemon NAME COMMAND...: runs COMMAND in the foreground of a background job
# and records its pid (ceph's own pid files are written only when it
# daemonizes).
daemon() {
  local name=$1
  shift
  "$@" -f >"$STATE/log/$name.stdout" 2>&1 &
  echo $! >"$STATE/run/$name.pid"
}

ceph_cli() { timeout 60 ceph -c "$CONF" --connect-timeout 30 "$@"; }

osd_up() { ceph_cli osd stat 2>/dev/null | grep -q '1 up'; }

write_conf() {
  local mon_port=$1 rgw_port=$2
  cat >"$CONF" <<EOF
[global]
fsid = $(cat /proc/sys/kernel/random/uuid)
mon host = v2:127.0.0.1:$mon_port
public addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
run dir = $STATE/run
admin socket = $STATE/run/\$name.asok
log file = $STATE/log/\$name.log
crash dir = $STATE/crash
# One OSD: every pool has one copy, a handful of placement groups (RGW makes
# about eight pools; the default of 32 PGs each would pass the per-OSD cap).
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
osd crush chooseleaf type = 0

[mon]
mon data = $STATE/mon
# Paxos commits every 50 ms instead of every second: the pools, the OSD
# map and RGW's setup are dozens of commits (a start of ~7 s instead of ~20).
paxos propose interval = 0.05
mon data avail warn = 1
mon data avail crit = 0

[osd]
osd data = $STATE/osd
osd objectstore = memstore
# memstore holds the objects in the OSD's memory; the tests write ~20 MiB.
memstore device bytes = 1073741824
osd max object name len = 460
osd max object namespace len = 64

[client]
# radosgw and radosgw-admin default to 'secure' mode towards the monitor,
# which with auth none waits for minutes before it falls back.
ms mon client mode = crc

[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$rgw_port
rgw dns name = s3.localhost
rgw data = $STATE/rgw
rgw enable usage log = false
EOF
}

start() {
  for bin in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool; do
    command -v "$bin" >/dev/null || {
      echo "ceph_rgw: $bin is not installed (apt-get install ceph-mon" \
        "ceph-osd radosgw ceph-common)" >&2
      exit 1
    }
  done
  STATE=$1
  mkdir -p "$STATE"
  STATE=$(cd "$STATE" && pwd)
  stop "$STATE"
  rm -rf "${STATE:?}"/{mon,osd,rgw,run,log,crash,monmap}
  mkdir -p "$STATE"/{mon,osd,rgw,run,log,crash}
  CONF=$STATE/ceph.conf
  trap 'rc=$?; ((rc == 0)) || stop "$STATE"; exit "$rc"' EXIT

  local mon_port rgw_port
  mon_port=$(free_port)
  rgw_port=$(free_port)
  write_conf "$mon_port" "$rgw_port"
  local fsid
  fsid=$(sed -n 's/^fsid = //p' "$CONF")

  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" \
    "$STATE/monmap" >/dev/null
  ceph-mon -c "$CONF" -i a --mkfs --monmap "$STATE/monmap" >/dev/null
  daemon mon.a ceph-mon -c "$CONF" -i a
  wait_for 30 mon.a "did not listen on port $mon_port" accepts "$mon_port"

  local osd_uuid id
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  id=$(ceph_cli osd new "$osd_uuid")
  ceph-osd -c "$CONF" -i "$id" --mkfs --osd-uuid "$osd_uuid" \
    >"$STATE/log/osd-mkfs.log" 2>&1
  daemon "osd.$id" ceph-osd -c "$CONF" -i "$id"
  wait_for 60 "osd.$id" "did not come up" osd_up

  daemon client.rgw radosgw -c "$CONF" -n client.rgw
  wait_for 60 client.rgw "did not listen on port $rgw_port" accepts "$rgw_port"

  local access secret
  access=RANGEIO$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n' | tr a-f A-F)
  secret=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
  timeout 60 radosgw-admin -c "$CONF" user create \
    --uid=rangeio-test --display-name="rangeio tests" \
    --access-key="$access" --secret-key="$secret" >/dev/null
  trap - EXIT

  cat <<EOF
export RANGEIO_TEST_RGW_ENDPOINT=http://127.0.0.1:$rgw_port
export RANGEIO_TEST_RGW_VHOST_ENDPOINT=http://s3.localhost:$rgw_port
export RANGEIO_TEST_RGW_ACCESS_KEY=$access
export RANGEIO_TEST_RGW_SECRET_KEY=$secret
EOF
}

# term_wait PIDFILE...: SIGTERM to each, then waits up to 10 s for each and
# kills what is left.
term_wait() {
  local pidfile pid pids=()
  for pidfile in "$@"; do
    [[ -f $pidfile ]] || continue
    pids+=("$(cat "$pidfile")")
    rm -f "$pidfile"
  done
  ((${#pids[@]})) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
}

# Ends radosgw, the OSD and the monitor by their pid files, one after the
# other (an OSD whose monitor is gone waits 5 s for it before it stops).
stop() {
  local state=$1
  [[ -d $state/run ]] || return 0
  term_wait "$state"/run/client.rgw.pid
  term_wait "$state"/run/osd.*.pid
  term_wait "$state"/run/mon.*.pid
}

[[ $# -eq 2 ]] || usage
case $1 in
  start) start "$2" ;;
  stop) stop "$2" ;;
  *) usage ;;
esac
