"""Throw-away TLS certificates for tests, made with the ``openssl`` command-line tool.

``make_certs(directory)`` writes a CA (``ca.pem``), a server certificate for ``localhost`` and
127.0.0.1 signed by it (``server.pem``, ``server.key``), a client certificate signed by it
(``client.pem``, ``client.key``), and a second, unrelated CA with a server certificate of its
own (``other-ca.pem``, ``other.pem``, ``other.key``): what a peer nobody trusts presents.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(cwd: Path, name: str) -> None:
    _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
         f"{name}.pem", "-days", "2", "-subj", f"/CN={name}", cwd=cwd)


def _leaf(cwd: Path, name: str, ca: str, cn: str, ext: str) -> None:
    _run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
         f"{name}.csr", "-subj", f"/CN={cn}", cwd=cwd)
    (cwd / f"{name}.ext").write_text(ext)
    _run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
         "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
         cwd=cwd)


def make_certs(directory: str | Path) -> Path:
    """Write the certificates described above into ``directory``; return it."""
    if shutil.which("openssl") is None:
        raise RuntimeError("make_certs needs the openssl command-line tool")
    cwd = Path(directory)
    cwd.mkdir(parents=True, exist_ok=True)
    _ca(cwd, "ca")
    _ca(cwd, "other-ca")
    server = "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
    _leaf(cwd, "server", "ca", "localhost", server)
    _leaf(cwd, "client", "ca", "client", "extendedKeyUsage=clientAuth\n")
    _leaf(cwd, "other", "other-ca", "localhost", server)
    for key in cwd.glob("*.key"):
        key.chmod(0o600)
    return cwd


__all__ = ["make_certs"]
