#!/usr/bin/env bash
# Installs what a new machine lacks: Debian packages, the npm dependencies, and the test servers' binaries
# (built once from pinned Go modules into ${XDG_CACHE_HOME:-~/.cache}/ctrlmesh/bin, then reused).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
# setpriv starts each test server with a parent-death signal, so no server outlives a killed test run.
command -v setpriv >/dev/null || need_apt+=(util-linux)
# Prometheus and promtool: the dashboards' test scrapes real processes and runs every panel's query.
command -v prometheus >/dev/null && command -v promtool >/dev/null || need_apt+=(prometheus)
# A real node (ctrlmesh dev up --node, the node test): containerd and runc run the pods, the CNI plugins wire them
# (bridge, host-local, loopback, portmap), kube-proxy programs iptables and reads conntrack.
command -v containerd >/dev/null || need_apt+=(containerd)
command -v runc >/dev/null || need_apt+=(runc)
[ -x /usr/lib/cni/bridge ] || need_apt+=(containernetworking-plugins)
command -v iptables >/dev/null || need_apt+=(iptables)
command -v conntrack >/dev/null || need_apt+=(conntrack)
# kube-router's firewall enforces NetworkPolicies on the node with iptables and ipsets it fills through ipset.
command -v ipset >/dev/null || need_apt+=(ipset)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! command -v go >/dev/null; then
  echo "setup: the Go toolchain is needed to build the test servers (kube-apiserver, etcd, nats-server); install Go 1.24 or newer" >&2
  exit 1
fi

echo "setup: npm ci"
npm ci --no-audit --no-fund

# Built here, up front, so a first run shows the (minutes long) build progress before the tests start.
echo "setup: test servers and a real node's components (ctrlmesh dev tools --node)"
node dist/src/cli/main.js dev tools --node
# The newer Kubernetes minor `npm run test:kube-next` runs (only its kube-apiserver differs; the rest is reused).
# Its module asks for Go 1.26: an older go fetches that toolchain itself (GOTOOLCHAIN=auto, the default).
echo "setup: kube-apiserver of the newer Kubernetes minor (ctrlmesh dev tools --kube-version v1.37)"
node dist/src/cli/main.js dev tools --kube-version v1.37
