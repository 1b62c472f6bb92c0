#!/usr/bin/env sh
# What the bridge examples share (zmq_to_nng_bridge.sh, nng_to_zmq_bridge.sh):
#
#   examples/bridge.sh FRONT BACK [FRONT_PORT [BACK_PORT [gateway bridge options...]]]
#
# execs `gateway bridge FRONT BACK [options...]` from this checkout; the caller already put the
# ports into FRONT and BACK and passes its own arguments on, so the ports are dropped here.
set -eu
FRONT=$1
BACK=$2
shift 2
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
# from a checkout: find the gateway package next to this script
PYTHONPATH="$(cd "$(dirname "$0")/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
exec "${PYTHON:-python3}" -m gateway bridge "$FRONT" "$BACK" "$@"
