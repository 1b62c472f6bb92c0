#!/usr/bin/env sh
# ZeroMQ clients -> nanomsg/nng servers.
#
#   examples/zmq_to_nng_bridge.sh [FRONT_PORT] [BACK_PORT] [gateway bridge options...]
#
# ZeroMQ REQ/DEALER clients connect to tcp://127.0.0.1:FRONT_PORT (default 5555); the gateway
# connects to an nng/nanomsg REP server on tcp://127.0.0.1:BACK_PORT (default 6000).
# Try it, in three terminals:
#   python examples/nng_rep_server.py --listen tcp://127.0.0.1:6000
#   examples/zmq_to_nng_bridge.sh
#   python examples/zmq_req_client.py --connect tcp://127.0.0.1:5555 --count 3
# Options pass through, e.g. --log-format json --metrics 127.0.0.1:9100, and
# append ?backend=pyzmq or ?backend=pynng to an endpoint to run that side on libzmq or nng.
set -eu
# the ports, when given, come first (numbers); everything else passes through to the gateway
FRONT_PORT=5555
BACK_PORT=6000
case "${1:-}" in ''|-*) ;; *) FRONT_PORT=$1; shift ;; esac
case "${1:-}" in ''|-*) ;; *) BACK_PORT=$1; shift ;; esac
exec sh "$(dirname "$0")/bridge.sh" \
    "@zmq+tcp://127.0.0.1:$FRONT_PORT" ">sp+tcp://127.0.0.1:$BACK_PORT" "$@"
