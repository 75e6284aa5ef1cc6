"""Memory of an ASGI door process under large distinct headers.

    .venv/bin/python bench/bench_header_memory.py                 # this tree
    .venv/bin/python bench/bench_header_memory.py --tree /old     # another checkout, same venv

Starts the ASGI door (uvicorn, uvloop, httptools) from the tree on the embedded SQLite in a fresh
directory, sends `--requests` v2 tracks, each with a distinct `--header-kib` Authorization header,
and prints the process's resident memory before and after, and the answers' statuses. A door that
keeps what clients send in a cache grows with every request; one that bounds it does not.
"""

from __future__ import annotations

import argparse
import collections
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def post(port: int, authorization: str) -> int:
    body = b'{"userId":"usr_1","event":"Report_Created"}'
    head = (
        f"POST /v2/track HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nAuthorization: {authorization}\r\n"
        "Connection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode("latin-1") + body)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return int(reply.split(b" ", 2)[1]) if reply else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to run the door from")
    parser.add_argument("--requests", type=int, default=120)
    parser.add_argument("--header-kib", type=int, default=1024)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="eds-bench-mem-")
    env = dict(os.environ, DATA_DIR=data_dir, DATABASE_URL="", CELERY_BROKER_URL="", DEBUG="0")
    env["ALLOWED_HOSTS"] = "127.0.0.1"
    python = sys.executable
    subprocess.run(
        [python, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=args.tree, env=env, check=True
    )
    port = free_port()
    server = subprocess.Popen(
        [str(Path(python).parent / "uvicorn"), "config.asgi:application", "--port", str(port)]
        + ["--loop", "uvloop", "--http", "httptools", "--log-level", "warning", "--no-access-log"],
        cwd=args.tree,
        env=env,
    )
    try:
        for _ in range(100):
            try:
                post(port, "Basic warm-up-key")
                break
            except OSError:
                time.sleep(0.1)
        before = rss_mib(server.pid)
        statuses: collections.Counter[int] = collections.Counter()
        filler = "k" * (args.header_kib * 1024)
        for i in range(args.requests):
            statuses[post(port, f"Basic {i:06d}{filler}")] += 1
        time.sleep(0.5)
        after = rss_mib(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"{args.tree}: {args.requests} requests, a distinct {args.header_kib} KiB header each")
    print(f"answers: {dict(statuses)}")
    print(f"resident MiB: {before:.0f} before, {after:.0f} after ({after - before:+.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
