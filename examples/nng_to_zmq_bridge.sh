#!/usr/bin/env sh
# nanomsg/nng clients -> ZeroMQ servers.
#
#   examples/nng_to_zmq_bridge.sh [FRONT_PORT] [BACK_PORT] [gateway bridge options...]
#
# nng/nanomsg REQ clients connect to tcp://127.0.0.1:FRONT_PORT (default 6001); the gateway
# connects to a ZeroMQ REP or ROUTER server on tcp://127.0.0.1:BACK_PORT (default 7000).
# Try it, in three terminals:
#   python examples/zmq_rep_server.py --bind tcp://127.0.0.1:7000
#   examples/nng_to_zmq_bridge.sh
#   python examples/nng_req_client.py --connect tcp://127.0.0.1:6001 --count 3
#   nanocat --req --connect tcp://127.0.0.1:6001 --data hello --ascii      # nanomsg's own CLI
set -eu
# the ports, when given, come first (numbers); everything else passes through to the gateway
FRONT_PORT=6001
BACK_PORT=7000
case "${1:-}" in ''|-*) ;; *) FRONT_PORT=$1; shift ;; esac
case "${1:-}" in ''|-*) ;; *) BACK_PORT=$1; shift ;; esac
exec sh "$(dirname "$0")/bridge.sh" \
    "@sp+tcp://127.0.0.1:$FRONT_PORT" ">zmq+tcp://127.0.0.1:$BACK_PORT" "$@"
