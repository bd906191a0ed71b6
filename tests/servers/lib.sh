# shellcheck shell=bash
# lib.sh — shell functions shared by run_servers.sh and ceph_rgw.sh (sourced).

usage() {
  echo "usage: $0 start|stop STATE_DIR" >&2
  exit 2
}

# A loopback port free now (node binds port 0 and reports what it got).
free_port() {
  node -e 'const s = require("net").createServer();
    s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}
