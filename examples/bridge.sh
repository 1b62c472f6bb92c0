#!/usr/bin/env sh
# What the bridge examples share (zmq_to_nng_bridge.sh, nng_to_zmq_bridge.sh):
#
#   examples/bridge.sh FRONT BACK [gateway bridge options...]
#
# execs `gateway bridge FRONT BACK [options...]` from this checkout; every option after the
# two endpoints passes through as it is.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 FRONT BACK [gateway bridge options...]" >&2
    exit 2
fi
FRONT=$1
BACK=$2
shift 2
# from a checkout: find the gateway package next to this script
PYTHONPATH="$(cd "$(dirname "$0")/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
exec "${PYTHON:-python3}" -m gateway bridge "$FRONT" "$BACK" "$@"
