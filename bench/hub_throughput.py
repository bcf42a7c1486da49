#!/usr/bin/env python3
"""Hub throughput: results per second from concurrent stations, p99 latency, ranking refresh time.

* ``--stations`` threads (default 50), each a station with its own key, lease and upload over
  real HTTP against ``evalstop hub serve`` (one uvicorn process) on SQLite or, with
  ``--postgres``, on a throw-away PostgreSQL 15 cluster (tools/hub/postgres.sh). Reported:
  accepted results per second, p50/p99 latency of the lease and of the upload.
* The leaderboard refresh with ``--results`` stored results (default 100 000): a full refresh
  (read the journal, rank, one anytime-valid test per pair) and an incremental refresh after one
  more result, with the journal read alone as the baseline measured in the same run.

    python bench/hub_throughput.py [--postgres] [--stations 50] [--per-station 20] [--results 100000]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from typing import Any

from _common import run_concurrently  # bench/ is on sys.path when run as a script

from evalstop_ros.hub.app import HubSettings, _Board
from evalstop_ros.hub.store import HubStore, open_store

REPO = pathlib.Path(__file__).resolve().parents[1]

CLI = [sys.executable, "-c", "import sys; from evalstop_ros.cli.main import main; sys.exit(main(sys.argv[1:]))"]
POSTGRES_SH = REPO / "tools" / "hub" / "postgres.sh"
#: Simulated policies (``sim://success=P``) of the hub benches.
POLICIES = {"alpha": 0.8, "beta": 0.5, "gamma": 0.3}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, key: str, body: dict[str, Any] | None = None) -> tuple[Any, float]:
    start = time.perf_counter()
    req = urllib.request.Request(url, data=json.dumps(body or {}).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as answer:
        payload = json.loads(answer.read())
    return payload, time.perf_counter() - start


def _pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1000


def start_postgres(cluster: pathlib.Path, databases: Sequence[str]) -> list[str]:
    """A throw-away PostgreSQL cluster in ``cluster`` (tools/hub/postgres.sh; stop it with
    ``postgres.sh stop``) with the empty ``databases``; their URLs."""
    subprocess.run([str(POSTGRES_SH), "install"], check=True)
    base = subprocess.run([str(POSTGRES_SH), "start", str(cluster), str(_port())], check=True,
                          capture_output=True, text=True).stdout.strip()
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        for name in databases:
            conn.execute(f"CREATE DATABASE {name}")
    return [base.rsplit("/", 1)[0] + "/" + name for name in databases]


def register(db: str, stations: Sequence[str]) -> tuple[list[str], str]:
    """``POLICIES``, the ``stations`` and a leaderboard viewer in the hub database ``db``; (the
    stations' keys, the viewer's key)."""
    store = open_store(db)
    for name, p in POLICIES.items():
        store.add_policy(name, f"sim://success={p}")
    keys = [store.add_station(name) for name in stations]
    viewer = store.add_station("viewer", "viewer")
    store.close()
    return keys, viewer


def start_hub(db: str, workdir: pathlib.Path, name: str, viewer: str, deadline: float = 90.0,
              extra: Sequence[str] = ()) -> tuple[subprocess.Popen[bytes], str]:
    """``evalstop hub serve`` on ``db`` at a free port (more options: ``extra``), output in
    ``workdir/<name>.log``, once it answers ``/v1/status`` for the ``viewer`` key within ``deadline`` s;
    (the process, its URL)."""
    port = _port()
    url = f"http://127.0.0.1:{port}"
    log_path = workdir / f"{name}.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([*CLI, "hub", "serve", "--db", db, "--port", str(port), "--lease-seconds", "600", *extra],
                                stdout=log, stderr=subprocess.STDOUT)
    end = time.monotonic() + deadline
    while True:
        try:
            urllib.request.urlopen(urllib.request.Request(url + "/v1/status", headers={"Authorization": f"Bearer {viewer}"}),
                                   timeout=2)
            return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() > end:
                raise SystemExit(f"{name} did not start: {log_path.read_text()}") from None
            time.sleep(0.2)


def throughput(db: str, stations: int, per_station: int, workdir: pathlib.Path) -> None:
    keys, viewer = register(db, [f"bench{i:03d}" for i in range(stations)])
    hub, url = start_hub(db, workdir, "hub", viewer)
    try:
        lease_lat: list[float] = []
        upload_lat: list[float] = []
        lock = threading.Lock()

        def station(i: int) -> None:
            for n in range(per_station):
                work, t_lease = _post(url + "/v1/work", keys[i])
                answer, t_upload = _post(url + f"/v1/assignments/{work['assignment_id']}/result", keys[i],
                                         {"upload_id": f"b{i:03d}-{n:06d}", "score_a": 1.0, "score_b": 0.0})
                assert answer["status"] == "recorded"
                with lock:
                    lease_lat.append(t_lease)
                    upload_lat.append(t_upload)

        wall = run_concurrently(station, stations)
    finally:
        hub.terminate()
        hub.wait(timeout=30)
    total = len(upload_lat)
    print(f"{stations} concurrent stations, {total} results in {wall:.2f} s: {total / wall:.1f} results/s accepted "
          f"(each with its lease: {2 * total / wall:.1f} requests/s)")
    print(f"  lease  latency p50 {_pct(lease_lat, 0.5):.1f} ms, p99 {_pct(lease_lat, 0.99):.1f} ms")
    print(f"  upload latency p50 {_pct(upload_lat, 0.5):.1f} ms, p99 {_pct(upload_lat, 0.99):.1f} ms")


def refresh(db: str, n_results: int) -> None:
    store: HubStore = open_store(db)
    for name in ("alpha", "beta", "gamma", "delta"):
        store.add_policy(name, "sim://success=0.5")
    names = store.policies()
    rows = []
    for i in range(n_results):
        a, b = names[i % 4], names[(i // 4 + 1 + i) % 4]
        if a == b:
            b = names[(i + 1) % 4]
        body = {"assignment": f"x{i}", "station": "bench", "upload_id": f"u{i}", "policy_a": a, "policy_b": b,
                "task": "t", "score_a": float(i % 3 == 0), "score_b": float(i % 5 == 0)}
        rows.append((float(i), "result", json.dumps(body, sort_keys=True)))
    with store._tx() as run:  # bulk load: the bench measures the refresh, not the inserts
        run.entries.extend(rows)  # numbered and chained at commit, as every entry
    start = time.perf_counter()
    entries = store.journal()
    read = time.perf_counter() - start
    board = _Board(store, HubSettings())
    start = time.perf_counter()
    full = board.get()
    t_full = time.perf_counter() - start
    store.add_station("late")  # one more journal entry
    start = time.perf_counter()
    board.get()
    t_incr = time.perf_counter() - start
    store.close()
    print(f"ranking refresh at {len(entries)} journal entries ({full['n_results']} results, {len(full['pairs'])} pairs):")
    print(f"  journal read alone (baseline) {read:.3f} s; full refresh {t_full:.3f} s "
          f"({t_full / read:.2f}x the read); incremental refresh after one more entry {t_incr * 1000:.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", action="store_true", help="run on a throw-away PostgreSQL 15 cluster")
    parser.add_argument("--stations", type=int, default=50)
    parser.add_argument("--per-station", type=int, default=20)
    parser.add_argument("--results", type=int, default=100_000)
    args = parser.parse_args()
    root = pathlib.Path(tempfile.mkdtemp(prefix="evalstop-hub-bench-"))
    root.chmod(0o711)
    cluster = root / "postgres"
    try:
        if args.postgres:
            dbs = tuple(start_postgres(cluster, ["bench_tp", "bench_refresh"]))
        else:
            dbs = (str(root / "tp.sqlite"), str(root / "refresh.sqlite"))
        print(f"database: {'PostgreSQL 15' if args.postgres else 'SQLite'}")
        throughput(dbs[0], args.stations, args.per_station, root)
        refresh(dbs[1], args.results)
    finally:
        if args.postgres:
            subprocess.run([str(POSTGRES_SH), "stop", str(cluster)], check=False)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
