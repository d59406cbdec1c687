#!/usr/bin/env bash
# Run a command with no network at all, to show that it downloads nothing:
#   tests/browser/offline.sh COMMAND [ARGS...]
# The command runs in a new, empty network namespace (`unshare -n`) where only the loopback
# interface is up (Jupyter kernels talk to their client over 127.0.0.1). Before it starts, a
# connection to pypi.org must fail, and it says so. Where namespaces are not allowed (not root
# and no user namespaces), the command runs with the network and says that instead; with
# REQUIRE_OFFLINE=1 (set by .ci/run) that is an error.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }

inside='ip link set lo up 2>/dev/null || ifconfig lo up 2>/dev/null || true
if python3 -c "import socket; socket.create_connection((\"pypi.org\", 443), timeout=3)" 2>/dev/null; then
  echo "offline.sh: the network is still reachable" >&2; exit 3
fi
echo "offline.sh: no network (unshare -n; pypi.org unreachable): $*" >&2
exec "$@"'

if unshare -n true 2>/dev/null; then
  exec unshare -n -- bash -c "$inside" offline "$@"
elif unshare -rn true 2>/dev/null; then  # unprivileged user namespace, mapped to root inside
  exec unshare -rn -- bash -c "$inside" offline "$@"
elif [ "${REQUIRE_OFFLINE:-0}" = 1 ]; then
  echo "offline.sh: cannot make a network namespace here (unshare -n), and REQUIRE_OFFLINE=1" >&2
  exit 4
else
  echo "offline.sh: cannot make a network namespace here; running WITH the network: $*" >&2
  exec "$@"
fi
