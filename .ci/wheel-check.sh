#!/usr/bin/env bash
# The package as a user gets it: the sdist (with the kernel's generated C), the compiled wheel
# built from it and a pure one (GATEWAY_NO_EXTENSIONS=1), each installed into a new venv
# from another directory (which holds a decoy `plugins/` package), with no extras, then with
# [matrix]. Checks: no pyspark and no top-level plugins/interop_tests without extras; the CLI,
# its plugins and a live bridge work; `gateway matrix` names the extra; with [matrix] a small
# matrix runs on Spark.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
case "$python" in */*) python=$(cd "$(dirname "$python")" && pwd)/$(basename "$python");; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
step() { printf '[wheel-check] %s\n' "$*" >&2; }
fail() { printf '[wheel-check] FAILED: %s\n' "$*" >&2; exit 1; }

step "building the sdist: it carries the kernel's generated C (no Cython needed to install)"
timeout 600 "$python" -m build -q --sdist -o "$work/sdist" "$repo" >/dev/null
sdist=$(ls "$work"/sdist/zmq_sp_gateway-*.tar.gz)
tar -tzf "$sdist" > "$work/sdist.txt"  # (not piped into grep -q: pipefail and SIGPIPE)
grep -q '/gateway/_kernel\.c$' "$work/sdist.txt" || fail "the sdist lacks gateway/_kernel.c"
grep -q '/gateway/_kernel\.pyx$' "$work/sdist.txt" || fail "the sdist lacks gateway/_kernel.pyx"
grep -q '/gateway/_kernel_read\.pxi$' "$work/sdist.txt" || fail "the sdist lacks the kernel's .pxi files"

step "building the wheels: compiled (from the sdist) and pure (GATEWAY_NO_EXTENSIONS=1)"
timeout 600 "$python" -m pip wheel -q --no-deps -w "$work/dist" "$sdist" >/dev/null
wheel=$(ls "$work"/dist/zmq_sp_gateway-*.whl)
case "$wheel" in *-py3-none-any.whl) fail "the wheel is not compiled: $wheel";; esac
"$python" -c 'import sys, zipfile
assert any(n.startswith("gateway/_kernel") and n.endswith(".so")
           for n in zipfile.ZipFile(sys.argv[1]).namelist()), "no gateway/_kernel*.so"' "$wheel"
GATEWAY_NO_EXTENSIONS=1 timeout 600 "$python" -m pip wheel -q --no-deps -w "$work/pure" \
  "$repo" >/dev/null
pure=$(ls "$work"/pure/zmq_sp_gateway-*.whl)
case "$pure" in *-py3-none-any.whl) ;; *) fail "the pure wheel is not py3-none-any: $pure";; esac
names=$("$python" -c 'import sys, zipfile
print(" ".join(sorted({n.split("/")[0] for n in zipfile.ZipFile(sys.argv[1]).namelist()
                       if not n.split("/")[0].endswith(".dist-info")})), end=" ")' "$wheel")
[ "$names" = "gateway gateway_plugins " ] || fail "wheel top-level names: $names"

step "installing it with no extras into a new venv"
timeout 300 "$python" -m venv "$work/venv"
venv="$work/venv/bin"
timeout 900 "$venv/python" -m pip install -q "$wheel"
site=$("$venv/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for name in pyspark plugins interop_tests tests; do
  [ ! -e "$site/$name" ] || fail "site-packages has $name"
done
for name in relay_floor.c kernel_hop.c peer.h; do  # what `gateway bench` compiles
  [ -f "$site/gateway/tools/bench/c/$name" ] || fail "the wheel lacks gateway/tools/bench/c/$name"
done

mkdir -p "$work/cwd/plugins/tcp"  # a user's own plugins/ package must not shadow anything
touch "$work/cwd/plugins/__init__.py" "$work/cwd/plugins/tcp/__init__.py"
cd "$work/cwd"
"$venv/gateway" --version | tee "$work/version.txt"
grep -q "(compiled kernel)" "$work/version.txt" || fail "the compiled wheel does not run its kernel"
"$venv/gateway" plugins | tee "$work/plugins.txt"
for p in tcp ipc inproc wires pyzmq_adapter pynng_adapter; do
  grep -q "gateway_plugins\.$p" "$work/plugins.txt" || fail "gateway plugins does not list gateway_plugins.$p"
done

bridge() {
step "a live bridge: libzmq REQ -> gateway -> nng REP ($1)"
"$1/python" - "$1/gateway" <<'PY'
import signal, subprocess, sys, threading
import pynng, zmq
rep = pynng.Rep0(recv_timeout=10000)
port = rep.listen("tcp://127.0.0.1:0").local_address.port
port = int.from_bytes(port.to_bytes(2, "little"), "big")  # pynng reports it in network order
threading.Thread(target=lambda: rep.send(b"re:" + rep.recv()), daemon=True).start()
gw = subprocess.Popen([sys.argv[1], "bridge", "@zmq+tcp://127.0.0.1:0", f">sp+tcp://127.0.0.1:{port}",
                       "--metrics", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
line = gw.stdout.readline()
assert line.startswith("READY "), line
fields = dict(kv.split("=", 1) for kv in line.split()[1:])
req = zmq.Context.instance().socket(zmq.REQ)
req.rcvtimeo = 10000
req.connect(fields["front"].split("+", 1)[1])
req.send(b"hello")
assert req.recv() == b"re:hello"
import urllib.request
text = urllib.request.urlopen(f"http://{fields['metrics']}/metrics", timeout=5).read().decode()
assert 'gateway_forwarded_messages_total{bridge="bridge",direction="reply"} 1.0' in text, text
gw.send_signal(signal.SIGTERM)
assert gw.wait(15) == 0
print("bridge ok")
PY
}
bridge "$venv"

step "the pure wheel in its own venv: the reference engine, the same bridge"
timeout 300 "$python" -m venv "$work/pvenv"
timeout 900 "$work/pvenv/bin/python" -m pip install -q "$pure"
"$work/pvenv/bin/gateway" --version | tee "$work/pversion.txt"
grep -q "pure Python: the compiled kernel is not built" "$work/pversion.txt" \
  || fail "the pure wheel does not say it runs pure Python"
bridge "$work/pvenv/bin"

step "gateway matrix without the extra: one line, exit 2"
set +e
out=$("$venv/gateway" matrix run --out "$work/m0" 2>&1); rc=$?
set -e
[ "$rc" = 2 ] || fail "gateway matrix run exited $rc: $out"
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "more than one line: $out"
printf '%s\n' "$out" | grep -q "zmq-sp-gateway\[matrix\]" || fail "the line does not name the extra: $out"

step "installing [matrix] and running the small matrix on Spark"
timeout 1200 "$venv/python" -m pip install -q "$wheel[matrix]"
export PYSPARK_PYTHON="$venv/python" PYSPARK_DRIVER_PYTHON="$venv/python"
timeout 900 "$venv/gateway" matrix run --select @small --out "$work/m1" --master 'local[2]'
timeout 300 "$venv/gateway" matrix report "$work/m1" --format markdown | tail -5
step "ok"
