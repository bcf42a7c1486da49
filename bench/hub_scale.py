#!/usr/bin/env python3
"""Hub scale on PostgreSQL (issue #23): many stations against two hub processes on one database,
and the lease latency after 100 000 assignments against a fresh hub.

* Two ``evalstop hub serve`` processes on one throw-away PostgreSQL 15 cluster
  (tools/hub/postgres.sh); ``--stations`` threads (default 200), each a station with its own key
  talking to hub ``i % 2`` over real HTTP: lease (``POST /v1/work``), resolve the runner ticket,
  upload the result, ``--rounds`` times. Reported: accepted results per second and the p50/p99
  latency of lease, ticket and upload.
* The same load again after the database was seeded with bulk INSERTs to ``--seed-assignments``
  assignments (default 100 000: reported trials with their results, one in twenty expired and
  handed out again). Reported: lease p99 after / lease p99 fresh, measured in the same run
  (acceptance of #23: within 2x).
* Without the queueing of 200 clients on a small machine: one station alone leasing, resolving
  and uploading ``--serial`` times in a row, fresh and after the seeding (its lease p50/p99 and
  their ratio).

    python bench/hub_scale.py [--stations 200] [--rounds 5] [--seed-assignments 100000]
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Any

from _common import run_concurrently  # bench/ is on sys.path when run as a script
from hub_throughput import POSTGRES_SH, _pct, _post, register, start_hub, start_postgres

REPO = pathlib.Path(__file__).resolve().parents[1]


def load(urls: list[str], keys: list[str], rounds: int, tag: str) -> dict[str, Any]:
    """Every station leases, resolves and uploads ``rounds`` times at once; latencies in s."""
    lat: dict[str, list[float]] = {"lease": [], "ticket": [], "upload": []}
    lock = threading.Lock()
    errors: list[str] = []

    def station(i: int) -> None:
        url = urls[i % len(urls)]
        try:
            for n in range(rounds):
                work, t_lease = _post(url + "/v1/work", keys[i])
                _, t_ticket = _post(url + "/v1/tickets/resolve", keys[i], {"ticket": work["runner_ticket"]})
                answer, t_upload = _post(url + f"/v1/assignments/{work['assignment_id']}/result", keys[i],
                                         {"upload_id": f"{tag}{i:03d}-{n:06d}", "score_a": 1.0, "score_b": 0.0})
                assert answer["status"] == "recorded", answer
                with lock:
                    lat["lease"].append(t_lease)
                    lat["ticket"].append(t_ticket)
                    lat["upload"].append(t_upload)
        except (OSError, AssertionError) as err:
            with lock:
                errors.append(f"station {i}: {err}")

    wall = run_concurrently(station, len(keys))
    if errors:
        raise SystemExit(f"{len(errors)} station(s) failed, e.g. {errors[0]}")
    return {"results": len(lat["upload"]), "wall": wall, **lat}


def serial(url: str, key: str, n: int, tag: str) -> list[float]:
    """Lease latencies (s) of one station alone, ``n`` leases in a row."""
    out = []
    for i in range(n):
        work, t_lease = _post(url + "/v1/work", key)
        _post(url + "/v1/tickets/resolve", key, {"ticket": work["runner_ticket"]})
        _post(url + f"/v1/assignments/{work['assignment_id']}/result", key,
              {"upload_id": f"{tag}-{i:06d}", "score_a": 0.0, "score_b": 1.0})
        out.append(t_lease)
    return out


def report(name: str, out: dict[str, Any]) -> None:
    print(f"{name}: {out['results']} results in {out['wall']:.1f} s = {out['results'] / out['wall']:.1f} results/s")
    for what in ("lease", "ticket", "upload"):
        print(f"  {what:6s} p50 {_pct(out[what], 0.5):7.1f} ms  p99 {_pct(out[what], 0.99):7.1f} ms")


def seed(db: str, n: int, stations: int) -> int:
    """Bulk-insert ``n`` assignments, spread over the ``stations`` registered ones (every twentieth expired and handed out again as the next
    one), the results of those reported, and their pair loads; returns the assignment count."""
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO assignments (assignment_id, station_id, policy_a, policy_b, task, state, lease_deadline, "
            "ticket_hash, requeue_of, created_at, ticket_used_at) "
            "SELECT 'seed' || i, 'st' || lpad((i %% %s)::text, 3, '0'), "
            "(ARRAY['alpha','beta','gamma'])[1 + i %% 3], (ARRAY['beta','gamma','alpha'])[1 + i %% 3], 'towel', "
            "CASE WHEN i %% 20 = 0 THEN 'requeued' ELSE 'done' END, i, md5('seed' || i), "
            "CASE WHEN i %% 20 = 1 THEN 'seed' || (i - 1) END, i, i "
            "FROM generate_series(1, %s) AS i", (stations, n))
        conn.execute("INSERT INTO results (assignment_id, upload_id, station_id, body_hash, received_at) "
                     "SELECT assignment_id, 'up-' || assignment_id, station_id, md5(assignment_id), created_at "
                     "FROM assignments WHERE state = 'done' AND assignment_id LIKE 'seed%%'")
        conn.execute("DELETE FROM pair_load")
        conn.execute("INSERT INTO pair_load (policy_low, policy_high, load) "
                     "SELECT LEAST(policy_a, policy_b), GREATEST(policy_a, policy_b), COUNT(*) FROM assignments "
                     "WHERE state IN ('leased', 'done') GROUP BY 1, 2")
        conn.execute("ANALYZE")
        return int(conn.execute("SELECT COUNT(*) FROM assignments").fetchone()[0])  # type: ignore[index]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stations", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5, help="leases per station in each phase")
    parser.add_argument("--seed-assignments", type=int, default=100_000)
    parser.add_argument("--serial", type=int, default=200, help="leases of the lone station in each phase")
    args = parser.parse_args()
    if not 1 <= args.stations <= 1000:
        parser.error("--stations must lie in 1..1000 (station ids st000..st999)")
    root = pathlib.Path(tempfile.mkdtemp(prefix="evalstop-hub-scale-"))
    root.chmod(0o711)
    cluster = root / "postgres"
    hubs: list[subprocess.Popen[bytes]] = []
    try:
        [db] = start_postgres(cluster, ["bench_scale"])
        keys, viewer = register(db, [f"st{i:03d}" for i in range(args.stations)])
        urls = []
        for n in range(2):
            proc, url = start_hub(db, root, f"hub{n}", viewer)
            hubs.append(proc)
            urls.append(url)
        print(f"PostgreSQL 15, 2 hub processes, {args.stations} stations x {args.rounds} leases per phase", flush=True)
        load(urls, keys[:10], 1, "warm")  # connections and imports
        fresh = load(urls, keys, args.rounds, "fresh")
        report("fresh hub", fresh)
        alone_fresh = serial(urls[0], keys[0], args.serial, "alone-fresh")
        start = time.perf_counter()
        total = seed(db, args.seed_assignments, args.stations)
        print(f"seeded to {total} assignments in {time.perf_counter() - start:.1f} s", flush=True)
        after = load(urls, keys, args.rounds, "after")
        report(f"after {total} assignments", after)
        alone_after = serial(urls[0], keys[0], args.serial, "alone-after")
        ratio = _pct(after["lease"], 0.99) / _pct(fresh["lease"], 0.99)
        print(f"lease p99 after / fresh, {args.stations} stations = {ratio:.2f} (acceptance: <= 2)")
        for name, lat in (("fresh", alone_fresh), (f"after {total}", alone_after)):
            print(f"one station alone, {name}: lease p50 {_pct(lat, 0.5):.1f} ms, p99 {_pct(lat, 0.99):.1f} ms")
        print(f"lease p99 after / fresh, one station alone = {_pct(alone_after, 0.99) / _pct(alone_fresh, 0.99):.2f}")
    finally:
        for proc in hubs:
            proc.terminate()
            proc.wait(timeout=30)
        subprocess.run([str(POSTGRES_SH), "stop", str(cluster)], check=False)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
