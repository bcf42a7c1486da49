#!/usr/bin/env python3
"""Hub scale on PostgreSQL: many stations against two hub processes on one database, watched by a
lab's screen, and the lease latency after 100 000 results against a fresh hub, in the same run.

* Two ``evalstop hub serve`` processes on one throw-away PostgreSQL 15 cluster
  (tools/hub/postgres.sh); ``--stations`` threads (default 200), each a station with its own key
  talking to hub ``i % 2`` over real HTTP: lease (``POST /v1/work``), resolve the runner ticket,
  upload the result, ``--rounds`` times. Meanwhile a **viewer polls hub 0's leaderboard every
  ``--poll`` s** (2 s, as a lab's screen does: ``GET /v1/leaderboard`` with a viewer key). Reported:
  accepted results per second, the p50/p99 latency of lease, ticket and upload (over both hubs and
  per hub) and of the viewer's reads.
* The hubs are stopped, the database is seeded with bulk INSERTs / COPY to ``--seed-results``
  results (default 100 000: the assignments, their results and the journal's ``result`` entries,
  hash-chained; one assignment in twenty expired and handed out again; planted success rates, so
  most pairs are decided, as on a hub that has run that long), the hubs are started again (each
  feeds the journal to its board before serving: reported), the viewer's first read fits the
  models (reported, not counted), and the same load runs again under the same viewer. Reported:
  lease p99 after / lease p99 fresh per hub process and overall (acceptance: <= 2 with
  a viewer polling every 2 s after 100 000 results, on two processes).
* Without the queueing of 200 clients: one station alone leasing, resolving and uploading
  ``--serial`` times in a row, fresh and after the seeding, under the viewer.

The hubs fit ``--models`` (default: every model but ``task``, whose 50 bootstrap refits docs/hub.md
advises against on a large hub).

    python bench/hub_scale.py [--stations 200] [--rounds 5] [--seed-results 100000] [--poll 2]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from typing import Any

from _common import run_concurrently  # bench/ is on sys.path when run as a script
from hub_throughput import POSTGRES_SH, _pct, _post, register, start_hub, start_postgres

REPO = pathlib.Path(__file__).resolve().parents[1]


def load(urls: list[str], keys: list[str], rounds: int, tag: str) -> dict[str, Any]:
    """Every station leases, resolves and uploads ``rounds`` times at once; latencies in s."""
    lat: dict[str, list[float]] = {"lease": [], "ticket": [], "upload": []}
    by_hub: list[list[float]] = [[] for _ in urls]
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
                    by_hub[i % len(urls)].append(t_lease)
                    lat["lease"].append(t_lease)
                    lat["ticket"].append(t_ticket)
                    lat["upload"].append(t_upload)
        except (OSError, AssertionError) as err:
            with lock:
                errors.append(f"station {i}: {err}")

    wall = run_concurrently(station, len(keys))
    if errors:
        raise SystemExit(f"{len(errors)} station(s) failed, e.g. {errors[0]}")
    return {"results": len(lat["upload"]), "wall": wall, "lease_by_hub": by_hub, **lat}


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


def seed(db: str, results: int, stations: int, seed: int = 7) -> tuple[int, int]:
    """Bulk-insert assignments, spread over the ``stations`` registered ones, until ``results`` of them
    are reported (every twentieth expired and handed out again as the next one), their results, the
    journal's ``result`` entries (hash-chained after the last entry) and the pair loads; returns
    (assignments, results)."""
    import random

    import psycopg

    from evalstop_ros.hub.chain import HUB_GENESIS, body_text, entry_hash

    n = results * 20 // 19 + 2
    names = ["alpha", "beta", "gamma"]
    success = dict(zip(names, (0.8, 0.5, 0.3), strict=True))
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
        last = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
        seq, previous = (int(last[0]), str(last[1])) if last else (0, HUB_GENESIS)
        rng = random.Random(seed)
        counted = 0
        with conn.cursor().copy("COPY journal (seq, at, kind, body, hash) FROM STDIN") as copy:
            for i in range(1, n + 1):
                if i % 20 == 0:
                    continue
                a, b = names[i % 3], names[(i + 1) % 3]
                body = body_text({"assignment": f"seed{i}", "station": f"st{i % stations:03d}", "upload_id": f"up-seed{i}",
                                  "policy_a": a, "policy_b": b, "task": "towel",
                                  "score_a": float(rng.random() < success[a]), "score_b": float(rng.random() < success[b])})
                seq += 1
                previous = entry_hash(previous, seq, float(i), "result", body)
                copy.write_row((seq, float(i), "result", body, previous))
                counted += 1
        conn.execute("ANALYZE")
        total = int(conn.execute("SELECT COUNT(*) FROM assignments").fetchone()[0])  # type: ignore[index]
        return total, counted


class Viewer:
    """A lab's screen: ``GET /v1/leaderboard`` of ``url`` every ``every`` s (on schedule, not after
    the previous answer plus a pause), in a thread; the latency of each read (s)."""

    def __init__(self, url: str, key: str, every: float) -> None:
        self.url, self.key, self.every = url, key, every
        self.reads: list[float] = []
        self.results: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def read(self) -> tuple[dict[str, Any], float]:
        start = time.perf_counter()
        req = urllib.request.Request(self.url + "/v1/leaderboard", headers={"Authorization": f"Bearer {self.key}"})
        with urllib.request.urlopen(req, timeout=3600) as answer:
            board = json.loads(answer.read())
        return board, time.perf_counter() - start

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            board, seconds = self.read()
            self.reads.append(seconds)
            self.results.append(int(board["n_results"]))
            due += self.every
            self._stop.wait(max(0.0, due - time.monotonic()))

    def __enter__(self) -> Viewer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def start_hubs(db: str, root: pathlib.Path, viewer: str, models: str) -> tuple[list[subprocess.Popen[bytes]], list[str]]:
    hubs, urls = [], []
    for n in range(2):
        proc, url = start_hub(db, root, f"hub{n}", viewer, deadline=3600, extra=["--models", models])
        hubs.append(proc)
        urls.append(url)
    return hubs, urls


def stop_hubs(hubs: list[subprocess.Popen[bytes]]) -> None:
    for proc in hubs:
        proc.terminate()
        proc.wait(timeout=60)


def phase(name: str, urls: list[str], keys: list[str], viewer: str, args: argparse.Namespace) -> dict[str, Any]:
    """The load of every station and then the lone station, under the viewer of hub 0."""
    with Viewer(urls[0], viewer, args.poll) as screen:
        out = load(urls, keys, args.rounds, name)
        alone = serial(urls[0], keys[0], args.serial, f"alone-{name}")
    report(name, out)
    print(f"  viewer: {len(screen.reads)} reads of hub 0 every {args.poll:g} s, p50 {_pct(screen.reads, 0.5):.1f} ms, "
          f"max {max(screen.reads) * 1000:.1f} ms, boards of {min(screen.results)}..{max(screen.results)} results")
    for hub in range(2):
        mine = out["lease_by_hub"][hub]
        print(f"  hub {hub}{' (viewed)' if hub == 0 else ''}: lease p50 {_pct(mine, 0.5):.1f} ms, p99 {_pct(mine, 0.99):.1f} ms")
    print(f"  one station alone (hub 0): lease p50 {_pct(alone, 0.5):.1f} ms, p99 {_pct(alone, 0.99):.1f} ms", flush=True)
    return {**out, "alone": alone}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stations", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5, help="leases per station in each phase")
    parser.add_argument("--seed-results", type=int, default=100_000)
    parser.add_argument("--serial", type=int, default=200, help="leases of the lone station in each phase")
    parser.add_argument("--poll", type=float, default=2.0, help="seconds between the viewer's reads (default 2)")
    parser.add_argument("--models", default="paired,bt,davidson,elo,prog", help="the hubs' --models")
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
        hubs, urls = start_hubs(db, root, viewer, args.models)
        print(f"PostgreSQL 15, 2 hub processes (--models {args.models}), {args.stations} stations x {args.rounds} "
              f"leases per phase, a viewer reading hub 0's leaderboard every {args.poll:g} s", flush=True)
        load(urls, keys[:10], 1, "warm")  # connections and imports
        Viewer(urls[0], viewer, args.poll).read()  # the page's imports
        fresh = phase("fresh", urls, keys, viewer, args)
        stop_hubs(hubs)
        start = time.perf_counter()
        total, results = seed(db, args.seed_results, args.stations)
        print(f"seeded to {total} assignments and {results} results in {time.perf_counter() - start:.1f} s", flush=True)
        start = time.perf_counter()
        hubs, urls = start_hubs(db, root, viewer, args.models)
        print(f"both hubs restarted, their boards fed every result, in {time.perf_counter() - start:.1f} s", flush=True)
        board, first = Viewer(urls[0], viewer, args.poll).read()
        print(f"first board read at {board['n_results']} results (models fitted on {board['models_as_of']}): "
              f"{first:.1f} s (not counted)", flush=True)
        after = phase("after", urls, keys, viewer, args)
        print(f"lease p99 after {results} results / fresh, with the viewer (acceptance: <= 2):")
        for hub in range(2):
            ratio = _pct(after["lease_by_hub"][hub], 0.99) / _pct(fresh["lease_by_hub"][hub], 0.99)
            print(f"  hub {hub}{' (viewed)' if hub == 0 else ''}: {ratio:.2f}")
        print(f"  both hubs, {args.stations} stations: {_pct(after['lease'], 0.99) / _pct(fresh['lease'], 0.99):.2f}")
        print(f"  one station alone on hub 0: {_pct(after['alone'], 0.99) / _pct(fresh['alone'], 0.99):.2f}")
    finally:
        stop_hubs(hubs)
        subprocess.run([str(POSTGRES_SH), "stop", str(cluster)], check=False)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
