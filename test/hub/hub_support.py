"""Helpers of the hub tests: a throw-away PostgreSQL cluster, a hub server process, HTTP calls."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from runner_support import free_port

from evalstop_ros.hub.errors import HubError
from evalstop_ros.hub.store import open_store
from evalstop_ros.station.client import read_records

REPO = pathlib.Path(__file__).resolve().parents[2]
POSTGRES_SH = REPO / "tools" / "hub" / "postgres.sh"
#: Run the evalstop CLI in a child process with this interpreter.
CLI = [sys.executable, "-c", "import sys; from evalstop_ros.cli.main import main; sys.exit(main(sys.argv[1:]))"]


class PostgresCluster:
    """A real PostgreSQL server started by tools/hub/postgres.sh in a temporary directory."""

    def __init__(self) -> None:
        subprocess.run([str(POSTGRES_SH), "install"], check=True)
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="evalstop-pg-"))
        self.root.chmod(0o711)  # the postgres user must reach its directory inside
        self.port = free_port()
        out = subprocess.run([str(POSTGRES_SH), "start", str(self.root / "cluster"), str(self.port)],
                             check=True, capture_output=True, text=True)
        self.admin_url = out.stdout.strip()
        self._n = 0

    def new_database(self) -> str:
        """A fresh, empty database in the cluster; its URL."""
        import psycopg

        self._n += 1
        name = f"hub_{os.getpid()}_{self._n}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.admin_url.rsplit("/", 1)[0] + "/" + name

    def stop(self) -> None:
        subprocess.run([str(POSTGRES_SH), "stop", str(self.root / "cluster")], check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def call(url: str, method: str = "GET", key: str | None = None, body: Any = None, raw: bytes | None = None,
         timeout: float = 120.0) -> tuple[int, Any]:
    """(status, decoded JSON or text) of one HTTP request; never raises for an HTTP status.

    The default timeout allows a loaded CI machine: the leaderboard refits its ranking models
    (about a CPU second for 72 results), and a hub at low priority may get a few % of a core."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:
            status, payload = answer.status, answer.read()
    except urllib.error.HTTPError as err:
        status, payload = err.code, err.read()
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, payload.decode(errors="replace")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600, env=env, check=False)


def register_hub(db: str, success: Mapping[str, float], stations: Sequence[str],
                 viewer: str = "viewer") -> tuple[dict[str, str], str]:
    """Register simulated policies (``sim://success=P``), stations and a leaderboard viewer in the
    hub database ``db``; returns the stations' keys by name and the viewer's key."""
    store = open_store(db)
    try:
        for name, p in success.items():
            store.add_policy(name, f"sim://success={p}")
        keys = {name: store.add_station(name) for name in stations}
        return keys, store.add_station(viewer, "viewer")
    finally:
        store.close()


def submit_simulated(db: str, success: Mapping[str, float], n: int, tasks: Sequence[str], schedule: str, seed: int,
                     score: Callable[[random.Random, float], float]) -> str:
    """A hub database ``db`` with simulated policies, station ``s1`` and a viewer (:func:`register_hub`),
    and ``n`` results of ``s1``: each lease (``schedule``, over ``tasks``) scored ``score(rng, P)`` per arm
    (``P`` its policy's success rate, ``rng`` seeded ``seed``); returns the viewer's key."""
    _, viewer = register_hub(db, success, ["s1"])
    store = open_store(db)
    try:
        rng = random.Random(seed)
        for i in range(n):
            work, _ = store.lease("s1", 60.0, list(tasks), schedule, rng)
            scores = [score(rng, success[p]) for p in (work.policy_a, work.policy_b)]
            store.submit("s1", work.assignment_id, f"upload-{i:05d}", *scores)
    finally:
        store.close()
    return viewer


class HubProcess:
    """``evalstop hub serve`` in a child process, waited for with a deadline."""

    def __init__(self, db: str, key: str, workdir: pathlib.Path, extra: Sequence[str] = (), host: str = "127.0.0.1") -> None:
        self.db, self.key, self.workdir, self.extra, self.host = db, key, workdir, list(extra), host
        self.port = free_port()
        self.url = f"http://{host}:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, deadline: float = 300.0) -> None:
        """Start the hub and wait until it answers (the deadline allows a loaded CI machine)."""
        self.starts += 1
        with open(self.workdir / f"hub-{self.starts}.log", "wb") as log:
            self.proc = subprocess.Popen([*CLI, "hub", "serve", "--db", self.db, "--host", self.host, "--port", str(self.port), *self.extra],
                                         stdout=log, stderr=subprocess.STDOUT)
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"hub exited: {(self.workdir / f'hub-{self.starts}.log').read_text()}")
            try:
                if call(self.url + "/v1/status", key=self.key, timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("hub did not answer within the deadline")

    def logs(self, tail: int = 4000) -> str:
        """The end of each run's output (uvicorn's access lines and any traceback), for a failure message."""
        return "".join(f"\n--- {self.url}, start {n}:\n" + (self.workdir / f"hub-{n}.log").read_text(errors="replace")[-tail:]
                       for n in range(1, self.starts + 1))

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def ip(*args: str) -> None:
    """Run ``ip ARGS`` (iproute2), failing on an error."""
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def wait_for(predicate: Any, deadline: float, what: str) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def station_records(directory: pathlib.Path) -> list[dict[str, Any]]:
    """The records of the station journal in ``directory`` (read-only, while the station runs);
    a journal being created (its file there, its tables not committed yet) is read again."""
    end = time.monotonic() + 5.0
    while True:
        try:
            return read_records(directory)
        except HubError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


#: Trials each simulated station runs.
TRIALS = 12
#: Success rates of the three simulated policies (``sim://success=P``) of the station tests.
POLICIES = {"alpha": 0.85, "beta": 0.5, "gamma": 0.2}


class Station:
    """`evalstop hub station` (simulated robot) in a child process, optionally behind ``prefix``
    (e.g. ``ip netns exec NS``)."""

    def __init__(self, name: str, hub_url: str, root: pathlib.Path, key: str, seed: int,
                 prefix: Sequence[str] = ()) -> None:
        self.name, self.hub_url, self.dir, self.seed, self.prefix = name, hub_url, root / name, seed, list(prefix)
        self.key_file = root / f"{name}.key"
        self.key_file.write_text(key)
        self.runs = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.runs += 1
        with open(self.dir.parent / f"{self.name}-{self.runs}.log", "wb") as log:
            self.proc = subprocess.Popen(
                [*self.prefix, *CLI, "hub", "station", "--hub", self.hub_url, "--key-file", str(self.key_file), "--dir", str(self.dir),
                 "--trials", str(TRIALS), "--trial-seconds", "0.3", "--seed", str(self.seed + 100 * self.runs)],
                stdout=log, stderr=subprocess.STDOUT)

    def records(self) -> list[dict[str, Any]]:
        return station_records(self.dir)

    def log(self) -> str:
        return "".join((self.dir.parent / f"{self.name}-{i}.log").read_text() for i in range(1, self.runs + 1))


def hub_journal(url: str, viewer: str) -> list[dict[str, Any]]:
    """The hub's journal entries (``GET /v1/journal`` with the viewer key)."""
    status, entries = call(url + "/v1/journal", key=viewer)
    assert status == 200, entries
    return list(entries)


def requeued(entries: Sequence[Mapping[str, Any]]) -> set[str]:
    """The assignments the hub's journal ``entries`` say were requeued."""
    return {e["body"]["assignment"] for e in entries if e["kind"] == "requeued"}


def leased(station: Any) -> set[str]:
    """The assignments ``station`` (anything with ``records()``, its local journal) has leased."""
    return {r["assignment_id"] for r in station.records() if r["kind"] == "leased"}


def lease_marks(records: list[dict[str, Any]]) -> list[str]:
    """The kinds of a station's records that take an assignment (``leased``) or end one (``result``, ``given_up``)."""
    return [r["kind"] for r in records if r["kind"] in ("leased", "result", "given_up")]


def mid_lease(station: Any) -> bool:
    """``station`` has counted two results at least and is in the middle of a lease (leased, not ended)."""
    marks = lease_marks(station.records())
    return marks.count("result") >= 2 and marks[-1] == "leased"


#: The lease of the network-namespace tests' hub (s): a cut lasts a few leases, not a fixed minute.
NETNS_LEASE = 3.0


@dataclasses.dataclass
class NetnsHub:
    """A hub (lease :data:`NETNS_LEASE`) on the host end of the veth pair of the network namespace
    ``netns``, with the stations ``remote`` (the test's, in the namespace) and ``local`` registered;
    ``local`` is a simulated station on the host. ``stations`` are stopped at the end."""

    netns: Mapping[str, str]
    db: str
    keys: dict[str, str]
    viewer: str
    hub: HubProcess
    local: Station
    stations: list[Station]

    @contextlib.contextmanager
    def cut_off(self, station: Any, noticed: Callable[[], bool]) -> Iterator[None]:
        """Cut ``station`` (in the namespace) off the hub in the middle of a lease until ``noticed()``,
        then (after the body, which runs while it is cut off) until the hub has requeued its lease;
        the link is up again on leaving, whatever happened."""
        wait_for(lambda: mid_lease(station), 120, f"station {station.name} to be in the middle of a lease")
        ip("link", "set", self.netns["host_if"], "down")
        try:
            wait_for(noticed, 20 * NETNS_LEASE, f"station {station.name} to notice the cut")
            yield
            wait_for(lambda: bool(requeued(hub_journal(self.hub.url, self.viewer)) & leased(station)),
                     20 * NETNS_LEASE, "the hub to requeue the cut-off station's lease")
        finally:
            ip("link", "set", self.netns["host_if"], "up")


@contextlib.contextmanager
def netns_hub(netns: Mapping[str, str], postgres: PostgresCluster, workdir: pathlib.Path,
              policies: Mapping[str, float]) -> Iterator[NetnsHub]:
    """A started :class:`NetnsHub` of ``policies`` (simulated success rates) on a new database."""
    db = postgres.new_database()
    keys, viewer = register_hub(db, policies, ("remote", "local"))
    hub = HubProcess(db, viewer, workdir, ["--lease-seconds", str(NETNS_LEASE)], host=netns["host_ip"])
    local = Station("local", hub.url, workdir, keys["local"], 2)
    run = NetnsHub(netns, db, keys, viewer, hub, local, [local])
    hub.start()
    try:
        yield run
    finally:
        stop_all(hub, run.stations)


def exit_ok(stations: Sequence[Any], timeout: float = 300.0, logs: Callable[[], str] = str) -> None:
    """Every station's process (``proc``) ends with status 0 within ``timeout`` seconds (else its
    ``log()`` and ``logs()``)."""
    for station in stations:
        assert station.proc is not None
        assert station.proc.wait(timeout=timeout) == 0, station.log() + logs()


def check_lost_lease_redone_once(entries: list[dict[str, Any]], lost_lease: Any, results: list[dict[str, Any]]) -> None:
    """The lease of a killed station was requeued, and exactly one of it and its requeued copies
    (transitively: a copy may expire again while the hub is down) has a counted result."""
    assert lost_lease in requeued(entries)
    lineage = {lost_lease}
    for e in entries:
        if e["kind"] == "assigned" and e["body"]["requeue_of"] in lineage:
            lineage.add(e["body"]["assignment"])
    assert len(lineage) >= 2
    assert len(lineage & {r["assignment"] for r in results}) == 1


def check_counted_once(entries: list[dict[str, Any]], stations: Sequence[Any], trials: int = TRIALS
                       ) -> list[dict[str, Any]]:
    """Assert every station result is counted once or refused, nothing pending; returns the hub's results.

    ``stations`` have a ``name`` and ``records()`` (the station's local journal), each ``trials`` results
    (or its own ``trials``, where it has that attribute)."""
    results = [e["body"] for e in entries if e["kind"] == "result"]
    uploads = [r["upload_id"] for r in results]
    assert len(uploads) == len(set(uploads)), "a result was counted twice"
    for station in stations:
        records = station.records()
        local = {r["upload_id"] for r in records if r["kind"] == "result"}
        acked = {r["upload_id"] for r in records if r["kind"] == "ack"}
        rejected = {r["upload_id"] for r in records if r["kind"] == "rejected"}
        assert len(local) == getattr(station, "trials", trials) and acked | rejected == local and not acked & rejected
        assert {r["upload_id"] for r in results if r["station"] == station.name} == acked
    return results


def check_results(hub: HubProcess, viewer: str, db: str, workdir: pathlib.Path, stations: Sequence[Any],
                  journals: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """The end of a hub test: every station's results counted once or refused (:func:`check_counted_once`),
    and the hub's leaderboard, which counts them all, equal to the offline analysis of its export, which
    the audit verifies (with the stations' journals, ``journals``: :func:`offline_equals_online`).
    Returns the hub's journal, its results and the leaderboard."""
    entries = hub_journal(hub.url, viewer)
    results = check_counted_once(entries, stations)
    online = offline_equals_online(hub, db, workdir, [s.dir for s in stations] if journals else ())
    assert online["n_results"] == len(results)
    return entries, results, online


def stop_all(hub: HubProcess, stations: Sequence[Station]) -> None:
    """Kill the stations still running and stop the hub (test teardown)."""
    for station in stations:
        if station.proc is not None and station.proc.poll() is None:
            station.proc.kill()
            station.proc.wait()
    hub.stop()


def offline_equals_online(hub: HubProcess, db: str, workdir: pathlib.Path,
                          stations: Sequence[pathlib.Path] = ()) -> dict[str, Any]:
    """Assert the hub's leaderboard equals `evalstop hub analyze` of `evalstop hub export`, and
    that `evalstop audit` of the export against that leaderboard and the ``stations``' journals
    verifies; return the leaderboard."""
    export = workdir / "journal.jsonl"
    exported = cli("hub", "export", "--db", db, "-o", str(export))
    assert exported.returncode == 0, exported.stderr
    offline = cli("hub", "analyze", str(export), "--json")
    assert offline.returncode == 0, offline.stderr
    status, online = call(hub.url + "/v1/leaderboard", key=hub.key)
    assert status == 200
    assert json.loads(offline.stdout) == online
    board = workdir / "leaderboard.json"
    board.write_text(json.dumps(online))
    audited = cli("audit", str(export), "--against", str(board), *(f"--station={d}" for d in stations))
    assert audited.returncode == 0 and audited.stdout.strip().endswith("VERIFIED"), audited.stdout + audited.stderr
    return dict(online)
