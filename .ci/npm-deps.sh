#!/usr/bin/env bash
# The npm packages the tests need, from the committed lock (.ci/node/package-lock.json), into
# .node/ (git-ignored): jszmq (ZWS 2.0, the JavaScript ZeroMQ over WebSocket) run under Node by
# the interop tests, and esbuild, which bundles jszmq for the browser page
# (examples/browser/vendor/jszmq.js, git-ignored). Needs node and npm (.ci/system-deps.sh);
# does nothing when the lock and the bundle are what the last run made.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.node/.installed
if [ -f "$stamp" ] && [ -f examples/browser/vendor/jszmq.js ] \
    && cmp -s .ci/node/package-lock.json .node/package-lock.json; then
  exit 0
fi
mkdir -p .node
cp .ci/node/package.json .ci/node/package-lock.json .ci/node/bundle.mjs .node/
(cd .node && npm ci --no-audit --no-fund --loglevel=error)
mkdir -p examples/browser/vendor
(cd .node && node bundle.mjs ../examples/browser/vendor/jszmq.js)
touch "$stamp"
