"""`make demo-hub`: a hub on a local PostgreSQL server with three simulated stations.

Starts a throw-away PostgreSQL cluster (tools/hub/postgres.sh, installing Debian's postgresql
if missing), registers three simulated policies and three stations, serves the hub, runs the
three stations as separate processes, prints the leaderboard, re-computes it offline from the
exported journal and checks that both agree, then audits the export (its hash chain, the
protocol, the stations' uploads against their own journals, the leaderboard re-derived:
``evalstop audit``). Everything it started is stopped at the end.

With ``--ros-stations`` (``make demo-hub-ros``; needs ``make ros`` and the ROS environment of
``tools/ros/env.sh``) each station is a ``station_manager`` and a ``sim_robot``,
in its own ROS domain (``--ros-domain``, +1, +2; discovery on localhost only).

    python tools/hub/demo.py [--trials 10] [--keep DIR] [--ros-stations [--ros-domain N]]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
POSTGRES_SH = HERE / "postgres.sh"
CLI = [sys.executable, "-c", "import sys; from evalstop_ros.cli.main import main; sys.exit(main(sys.argv[1:]))"]
POLICIES = {"pi0-fast": 0.8, "octo": 0.55, "diffusion": 0.35}
STATIONS = ("lab-a", "lab-b", "lab-c")
#: The node executables of `make ros` (colcon install tree).
ROS_LIB = pathlib.Path(os.environ.get("EVALSTOP_INSTALL", HERE.parents[1] / "build" / "ros" / "install")) / "lib" / "evalstop"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(*args: str) -> str:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"evalstop {' '.join(args[:2])} failed: {done.stderr.strip()}")
    return done.stdout


def _get(url: str, key: str) -> object:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(req, timeout=10) as answer:
        return json.loads(answer.read())


def _run_stations(hub_url: str, root: pathlib.Path, trials: int) -> None:
    """The simulated Python stations (`evalstop hub station`), one process each."""
    stations = [subprocess.Popen([*CLI, "hub", "station", "--hub", hub_url, "--key-file", str(root / f"{s}.key"),
                                  "--dir", str(root / s), "--trials", str(trials), "--trial-seconds", "0.1",
                                  "--seed", str(i)], stdout=subprocess.PIPE, text=True)
                for i, s in enumerate(STATIONS)]
    for name, proc in zip(STATIONS, stations):
        out, _ = proc.communicate(timeout=600)
        print(f"[{name}] {out.strip().splitlines()[-1]}")
        if proc.returncode != 0:
            raise SystemExit(f"station {name} failed:\n{out}")


def _run_ros_stations(hub_url: str, root: pathlib.Path, trials: int, domain: int) -> None:
    """Each station: sim_robot and station_manager, in ROS domain ``domain + i``."""
    if not (ROS_LIB / "station_manager").exists():
        raise SystemExit(f"no ROS build in {ROS_LIB.parent.parent}: run `make ros` (or `make demo-hub-ros`)")
    # The stations' journals in a directory of their own: the manager makes its journal directory
    # owner-only (0700), which would lock PostgreSQL's server user out of the cluster under root.
    started: list[tuple[str, subprocess.Popen[bytes], subprocess.Popen[bytes]]] = []
    try:
        for i, name in enumerate(STATIONS):
            env = {**os.environ, "ROS_DOMAIN_ID": str(domain + i), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
            with open(root / f"{name}-robot.log", "wb") as log:
                robot = subprocess.Popen([str(ROS_LIB / "sim_robot"), "--ros-args", "-p", "duration:=0.1",
                                          "-p", f"seed:={i}"], env=env, stdout=log, stderr=subprocess.STDOUT)
            with open(root / f"{name}-manager.log", "wb") as log:
                manager = subprocess.Popen([
                    str(ROS_LIB / "station_manager"), "--ros-args", "-p", f"hub_url:={hub_url}",
                    "-p", f"station_id:={name}", "-p", f"hub_key_file:={root / f'{name}.key'}",
                    "-p", f"hub_trials:={trials}", "-p", f"journal_dir:={root / 'journals'}",
                    "-p", "exit_on_finish:=true"],
                    env=env, stdout=log, stderr=subprocess.STDOUT)
            started.append((name, robot, manager))
        for name, _, manager in started:
            manager.wait(timeout=600)
            lines = (root / f"{name}-manager.log").read_text(errors="replace").strip().splitlines()
            print(f"[{name}] {lines[-1] if lines else ''}")
            if manager.returncode != 0:
                raise SystemExit(f"station {name} failed:\n" + "\n".join(lines[-30:]))
    finally:
        for _, robot, manager in started:
            for proc in (manager, robot):
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
                    try:
                        proc.wait(timeout=15)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10, help="trials per station")
    parser.add_argument("--keep", default=None, help="keep the stations' journals and the hub journal here")
    parser.add_argument("--ros-stations", action="store_true",
                        help="stations are station_manager + sim_robot processes (needs `make ros`)")
    parser.add_argument("--ros-domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID") or 0),
                        help="ROS domain of the first ROS station (the others: +1, +2)")
    args = parser.parse_args()
    subprocess.run([str(POSTGRES_SH), "install"], check=True)
    root = pathlib.Path(tempfile.mkdtemp(prefix="evalstop-hub-demo-"))
    root.chmod(0o711)
    cluster = root / "postgres"
    print("starting PostgreSQL ...", flush=True)
    url = subprocess.run([str(POSTGRES_SH), "start", str(cluster), str(_port())], check=True, capture_output=True,
                         text=True).stdout.strip()
    hub = None
    try:
        for name, p in POLICIES.items():
            _cli("hub", "add-policy", "--db", url, name, f"sim://success={p}")
        for station in STATIONS:
            _cli("hub", "add-station", "--db", url, station, "--key-file", str(root / f"{station}.key"))
        _cli("hub", "add-station", "--db", url, "board", "--viewer", "--key-file", str(root / "board.key"))
        viewer = (root / "board.key").read_text().strip()
        port = _port()
        hub_url = f"http://127.0.0.1:{port}"
        hub = subprocess.Popen([*CLI, "hub", "serve", "--db", url, "--port", str(port), "--tasks", "towel,cup,drawer",
                                "--lease-seconds", "30"])
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(hub_url + "/v1/status", viewer)
                break
            except OSError:
                if time.monotonic() > deadline or hub.poll() is not None:
                    raise SystemExit("the hub did not start") from None
                time.sleep(0.2)
        kind = "ROS stations (station_manager + sim_robot)" if args.ros_stations else "stations"
        print(f"hub on {hub_url} (PostgreSQL); three {kind} x {args.trials} trials ...", flush=True)
        if args.ros_stations:
            _run_ros_stations(hub_url, root, args.trials, args.ros_domain)
        else:
            _run_stations(hub_url, root, args.trials)
        board = _get(hub_url + "/v1/leaderboard", viewer)
        journal = root / "journal.jsonl"
        _cli("hub", "export", "--db", url, "-o", str(journal))
        print(_cli("hub", "analyze", str(journal)).rstrip())
        offline = json.loads(_cli("hub", "analyze", str(journal), "--json"))
        if offline != board:
            print("MISMATCH between the hub's leaderboard and the offline analysis of its journal", file=sys.stderr)
            return 1
        print("the hub's leaderboard equals the offline analysis of its journal")
        saved = root / "leaderboard.json"
        saved.write_text(json.dumps(board))
        stations = [] if args.ros_stations else [f"--station={root / s}" for s in STATIONS]
        audit = subprocess.run([*CLI, "audit", str(journal), "--against", str(saved), *stations],
                               capture_output=True, text=True, check=False)
        print(audit.stdout.rstrip() or audit.stderr.rstrip())
        if audit.returncode != 0:
            return 1
        if args.keep:
            shutil.copytree(root, args.keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("postgres"))
        return 0
    finally:
        if hub is not None:
            hub.terminate()
            hub.wait(timeout=30)
        subprocess.run([str(POSTGRES_SH), "stop", str(cluster)], check=False)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
