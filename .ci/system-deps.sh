#!/usr/bin/env bash
# Debian packages the interop tests and the matrix need: nanomsg's and nng 1.5's CLIs, JeroMQ 0.3
# (a ZMTP 2.0 peer), a JDK (Spark's Java runtime, and javac for the JeroMQ peer program,
# compiled at test time), Debian's pyzmq (libzmq 4.3.4, another libzmq generation for the
# matrix), a C compiler and the Python headers (the compiled kernel, the storm client),
# Prometheus (with promtool) and Chromium with its driver (metrics scraped by a real Prometheus;
# the documentation site and the matrix report in a headless browser), iproute2 (network
# namespaces for the multi-host fault tests). Installs only what is missing; needs root (CI and
# dev machines are).
set -euo pipefail
need=()
command -v nanocat >/dev/null 2>&1 || need+=(nanomsg-utils)
command -v nngcat >/dev/null 2>&1 || need+=(nng-utils)
# the bench's C load peers (gateway/tools/bench/c/*.c, compiled by `gateway bench` with gcc):
# libzmq's and nng 1.5's headers and link libraries
[ -f /usr/include/zmq.h ] || need+=(libzmq3-dev)
[ -f /usr/include/nng/nng.h ] || need+=(libnng-dev)
command -v javac >/dev/null 2>&1 || need+=(default-jdk-headless)
[ -f /usr/share/java/jeromq.jar ] || need+=(libjeromq-java)
command -v openssl >/dev/null 2>&1 || need+=(openssl)  # test certificates (SP over TLS)
command -v curl >/dev/null 2>&1 || need+=(curl)  # the README's metrics example
# the compiled kernel (gateway/_kernel.pyx): a C compiler and the Python headers (a Python
# built from source, as pyenv's, has its own; Debian's python3 needs python3-dev); libasan and
# libubsan come with gcc (the sanitizer build, .ci/sanitize.sh)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
[ -f /usr/include/sodium.h ] || need+=(libsodium-dev)  # the kernel's CURVE boxes
# the kernel harnesses' sanitizer build (fuzz/_asan.py, `make fuzz-ci`): clang, and compiler-rt
# for the small ASan part a shared library links (the runtime is atheris's; x86-64, as atheris)
if [ "$(uname -m)" = x86_64 ]; then
  command -v clang >/dev/null 2>&1 || need+=(clang)
  [ -f "$(clang --print-runtime-dir 2>/dev/null)/libclang_rt.asan_static-x86_64.a" ] \
    || need+=(libclang-rt-dev)
fi
python3 -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
  || need+=(python3-dev)
# a real Prometheus scraping the gateway, and promtool testing the shipped alert rules
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
# the documentation site's pages checked in a real browser (headless, driven by selenium)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
# jszmq (ZeroMQ over WebSocket in JavaScript) under Node, and npm to install it from the lock
# (.ci/npm-deps.sh): the ZWS interop tests and the browser example's bundle
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
[ -d /usr/lib/python3/dist-packages/zmq ] || need+=(python3-zmq)  # libzmq 4.3.4, /usr/bin/python3
# instructions per request under callgrind (gateway/tools/bench/instructions.py): a measure
# of the pure path that this machine's timing noise does not move
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
# a middle's system calls counted by the kernel (perf stat on the syscalls tracepoints:
# gateway/tools/bench/syscount.py; where tracepoints are not permitted it says why)
command -v perf >/dev/null 2>&1 || need+=(linux-perf)
# network namespaces, veth pairs and a bridge for the multi-host fault tests (ip, bridge)
{ command -v ip && command -v bridge; } >/dev/null 2>&1 || need+=(iproute2)
# tshark (with Lua) runs the shipped Wireshark dissectors on the gateway's captures
# (gateway/tools/wireshark/*.lua, interop_tests/test_capture.py)
command -v tshark >/dev/null 2>&1 || need+=(tshark)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "system-deps: missing ${need[*]}; run as root or: sudo apt-get install ${need[*]}" >&2
  exit 1
fi
echo "system-deps: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# wireshark-common asks whether non-root users may capture: no (the tests read files only)
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
