"""``evalstop hub``: run the evaluation hub, manage its policies and stations, run a station.

The hub's database is --db (or $EVALSTOP_HUB_DB): a PostgreSQL URL (postgresql://...) or an
SQLite file (the default, hub.sqlite, owner-only). Sub-commands:

  serve          the HTTP service (FastAPI + uvicorn)
  add-policy     register a policy and its policy-server address
  add-station    register a station (or --viewer) and write its API key to --key-file
  revoke         revoke a station's key (its open lease is requeued)
  export         the global journal as JSON lines
  analyze        the leaderboard re-computed offline from an exported journal
  station        a simulated station: lease, run, journal locally, upload (sync later)

The leaderboard is at /leaderboard (HTML; a browser signs in there with a viewer key) and
/v1/leaderboard (JSON, with the header Authorization: Bearer KEY of a viewer); station keys are
refused (403), so that stations stay blind to their arms. --public-leaderboard serves both to
anyone, stations included, which weakens that blinding.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

from ..hub.designs import DECLARE_AFTER, FAMILIES
from ..hub.errors import HubError
from ..hub.rankings import MODELS, RANKERS, parse_models
from ..hub.schedule import SCHEDULES
from . import EXIT_UNAVAILABLE
from ._common import CliError, bounded_int, count_type, print_json, seed_type

HELP = "evaluation hub for many stations (serve, add-policy, add-station, revoke, export, analyze, station)"
DESCRIPTION = __doc__.split("\n\n", 1)[1] if __doc__ else ""
EPILOG = """\
examples:
  evalstop hub add-policy --db hub.sqlite pi0 sim://success=0.7
  evalstop hub add-policy --db hub.sqlite octo sim://success=0.4
  evalstop hub add-station --db hub.sqlite lab1 --key-file lab1.key
  evalstop hub serve --db hub.sqlite --port 8765 --tasks towel,cup
  evalstop hub station --hub http://127.0.0.1:8765 --key-file lab1.key --dir lab1 --trials 20
  evalstop hub export --db hub.sqlite -o journal.jsonl && evalstop hub analyze journal.jsonl --json
  evalstop rank journal.jsonl --model paired

(sim://success=P is a simulated policy, what `hub station` runs; a real policy server is
registered by its address, e.g. tcp://10.0.0.5:8000, and run by a ROS station.)

exit status: 0 done, 2 usage or input error (unknown policy or station, unreadable journal),
3 hub serve cannot listen on --host:--port (in use: pick another --port); 130 stopped (Ctrl-C)."""
DEFAULT_DB = "hub.sqlite"
#: The environment variable that names the database (a PostgreSQL URL with a password stays off the command line).
DB_ENV = "EVALSTOP_HUB_DB"
DB_HELP = (f"postgresql:// URL or SQLite path (default: ${DB_ENV}, else {DEFAULT_DB}); a password belongs in "
           f"~/.pgpass, $PGPASSWORD or ${DB_ENV}, not here, where every local user can read it")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the sub-commands of ``evalstop hub``."""
    sub = parser.add_subparsers(dest="hub_command", required=True)
    serve = sub.add_parser("serve", help="run the hub service",
                           description="Run the hub's HTTP service (stations, leaderboard) until Ctrl-C. The "
                           "first start journals\nthe evaluation (method, alpha, ranker, models, budget, schedule, "
                           "tasks); a restart on the same --db\nreads it back, so no option needs repeating (one "
                           "given must equal the journaled one).",
                           epilog="examples:\n  evalstop hub serve --db hub.sqlite --port 8765 --tasks towel,cup\n"
                           "  evalstop hub serve --db hub.sqlite --port 8765    (a restart: the journaled evaluation)"
                           "\n\nexit status: 0 stopped, 2 usage error, 3 cannot listen on --host:--port",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("--db", default=None, help=DB_HELP)
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default %(default)s: this machine only; 0.0.0.0 for every "
                       "interface)")
    serve.add_argument("--port", type=bounded_int(0, 65535), default=8765, help="TCP port to listen on (default %(default)s)")
    journaled = "the journaled evaluation's, else "
    serve.add_argument("--tasks", type=_tasks, default=None,
                       help=f"comma-separated task/scene suggestions (default {journaled}default)")
    serve.add_argument("--lease-seconds", type=float, default=60.0, help="lease length (default %(default)s)")
    serve.add_argument("--schedule", choices=SCHEDULES, default=None,
                       help="how the next pair is drawn: uncertain (decided pairs leave; the open pairs adjacent in "
                       "the current ranking first), need (the pairs with the fewest assignments so far) or uniform "
                       f"(any pair, RoboArena's pairing); default {journaled}{SCHEDULES[0]}; docs/hub_study.md")
    serve.add_argument("--method", default=None, help=f"pairwise anytime-valid test (default {journaled}mixture)")
    _analysis_arguments(serve, journaled=True)
    serve.add_argument("--public-leaderboard", action="store_true",
                       help="serve the leaderboard without a key, to anyone including stations (weakens blinding)")
    serve.add_argument("--relay", action=argparse.BooleanOptionalAction, default=None,
                       help="relay the policy protocol for each lease (WebSocket /v1/relay): runners get relay "
                       "locators, no station learns a policy server's address (default: on with PostgreSQL, the "
                       "multi-lab hub; off with SQLite, one lab); docs/hub.md")
    serve.add_argument("--seed", type=seed_type, default=None, help="seed of the pair draws")
    policy = sub.add_parser("add-policy", help="register a policy")
    policy.add_argument("--db", default=None, help=DB_HELP)
    policy.add_argument("name", help="policy name shown on the leaderboard")
    policy.add_argument("address", help="policy-server address (kept in the hub, given to runners only)")
    station = sub.add_parser("add-station", help="register a station and write its key")
    station.add_argument("--db", default=None, help=DB_HELP)
    station.add_argument("station_id", help="the station's name (or the viewer's)")
    station.add_argument("--viewer", action="store_true", help="a read-only key (leaderboard, journal)")
    station.add_argument("--key-file", required=True, help="where to write the key (mode 600); it is shown nowhere else")
    revoke = sub.add_parser("revoke", help="revoke a station's key")
    revoke.add_argument("--db", default=None, help=DB_HELP)
    revoke.add_argument("station_id", help="the station whose key stops working")
    export = sub.add_parser("export", help="write the global journal as JSON lines")
    export.add_argument("--db", default=None, help=DB_HELP)
    export.add_argument("-o", "--output", default="-", help="file (default stdout)")
    analyze = sub.add_parser("analyze", help="leaderboard of an exported journal, offline")
    analyze.add_argument("journal", help="JSON-lines journal from `evalstop hub export`")
    analyze.add_argument("--method", default=None, help="pairwise anytime-valid test (default: the export's)")
    _analysis_arguments(analyze, journaled=True)
    analyze.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    run = sub.add_parser("station", help="run a simulated station against a hub")
    run.add_argument("--hub", required=True, help="hub URL, e.g. http://127.0.0.1:8765")
    run.add_argument("--key-file", default=None, help="file holding the key (default: $EVALSTOP_HUB_KEY)")
    run.add_argument("--dir", required=True, help="the station's directory (local journal)")
    run.add_argument("--trials", type=count_type, required=True, help="trials to run before stopping")
    run.add_argument("--trial-seconds", type=float, default=0.2,
                     help="simulated trial length in s (default %(default)s)")
    run.add_argument("--seed", type=seed_type, default=None, help="seed of the simulated outcomes (default: random)")


def _analysis_arguments(parser: argparse.ArgumentParser, journaled: bool = False) -> None:
    """The leaderboard's options, shared by serve and analyze: ``serve`` journals them as the hub's
    evaluation on its first start and reads them back on a restart (hub/evaluation.py); ``analyze``
    reads that from the export, and an option given there is a what-if analysis. ``journaled``:
    the options default to ``None`` (not given)."""
    given = "the journaled evaluation's, else " if journaled else ""

    def default(value: object) -> object:
        return None if journaled else value

    parser.add_argument("--alpha", type=_alpha, default=default(0.05),
                        help="family-wise level of the pairwise claims over all P(P-1)/2 pairs, sequential Holm "
                        f"(default {given}0.05); the rankings' intervals are at 1 - alpha")
    parser.add_argument("--ranker", choices=RANKERS, default=default("bt"),
                        help=f"model of the primary ranking (default {given}bt); winrate: raw "
                        "win rate")
    parser.add_argument("--models", type=_models, default=default(MODELS),
                        help="ranking models shown with SEs and intervals, comma-separated or 'all' (default "
                        f"{given}all: {','.join(MODELS)}); task fits 50 bootstrap refits, slow "
                        "on large hubs")
    parser.add_argument("--budget", type=bounded_int(0, 10**9), default=default(0),
                        help=f"results after which the evaluation is reported finished (default {given}"
                        "0: no budget)")
    parser.add_argument("--family", choices=FAMILIES, default=default(FAMILIES[0]),
                        help=f"the pairs' family (default {given}{FAMILIES[0]}): declared (a warm-up of "
                        f"{DECLARE_AFTER} results per pair orders the policies; weighted Holm favours the "
                        "pairs likely adjacent in the true order on the later results) or all-pairs (every direction "
                        "at equal weight on every result); docs/hub.md")


def _alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1); found {text}")
    return value


def _tasks(text: str) -> tuple[str, ...]:
    tasks = tuple(t.strip() for t in text.split(",") if t.strip())
    if not tasks:
        raise argparse.ArgumentTypeError(f"one task name at least, comma-separated; found {text!r}")
    return tasks


def _models(text: str) -> tuple[str, ...]:
    try:
        return parse_models(text)
    except HubError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def run(args: argparse.Namespace) -> int:
    """Dispatch the sub-command; hub errors become one-line CLI errors."""
    if hasattr(args, "db"):
        if args.db is not None and _has_password(args.db):
            print(f"{args.prog} {args.hub_command}: warning: the --db connection string holds a password, which every "
                  f"local user can read in this process's command line; use ~/.pgpass, $PGPASSWORD or ${DB_ENV}",
                  file=sys.stderr)
        args.db = args.db or os.environ.get(DB_ENV) or DEFAULT_DB
    try:
        return int(COMMANDS[args.hub_command](args))
    except HubError as err:
        raise CliError(str(err)) from err


def _has_password(database: str) -> bool:
    import urllib.parse

    try:
        return database.startswith(("postgresql:", "postgres:")) and bool(urllib.parse.urlsplit(database).password)
    except ValueError:
        return True  # unparsable: assume the worst


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ..hub.app import HubSettings, create_app
    from ..hub.evaluation import journaled, resumed
    from ..hub.store import open_store

    problem = _cannot_listen(args.host, args.port)  # before the database is opened: nothing left behind
    if problem:
        print(f"{args.prog} serve: error: cannot listen on {args.host}:{args.port}: {problem}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    created = _new_sqlite_files(args.db)
    try:
        store = open_store(args.db)
        try:
            evaluation = resumed(journaled(e.to_dict() for e in store.journal(kinds=["evaluation"])),
                                 {name: getattr(args, name) for name in _EVALUATION_OPTIONS})
            settings = HubSettings(lease_seconds=args.lease_seconds, public_leaderboard=args.public_leaderboard,
                                   seed=args.seed, relay=store.dialect == "postgresql" if args.relay is None else args.relay,
                                   **{name: getattr(evaluation, name) for name in _EVALUATION_OPTIONS})
            app = create_app(store, settings)
        except BaseException:
            store.close()
            raise
    except BaseException:
        for path in created:  # a start that failed leaves no empty database behind
            path.unlink(missing_ok=True)
        raise
    url = f"http://{_shown_host(args.host)}:{args.port}"
    print(f"evalstop hub on {url} ({store.dialect}, schema v{store.schema_version()}); evaluation: "
          f"{settings.method} at family-wise alpha {settings.alpha:g} ({settings.family} family), ranker {settings.ranker}, schedule "
          f"{settings.schedule}, tasks {','.join(settings.tasks)}; "
          f"{'policy protocol relayed' if settings.relay else 'addresses given to runners, not relayed'}\n"
          f"leaderboard: {url}/leaderboard (a browser signs in with a viewer key"
          f"{'; public' if args.public_leaderboard else ''}), JSON: {url}/v1/leaderboard; Ctrl-C stops",
          file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    store.close()
    return 0


#: The options of ``serve`` that are the hub's journaled evaluation (:class:`~..hub.evaluation.Evaluation`).
_EVALUATION_OPTIONS = ("method", "alpha", "ranker", "models", "budget", "schedule", "tasks", "family")


def _new_sqlite_files(db: str) -> list[pathlib.Path]:
    """The files an SQLite ``db`` that does not exist yet will create (none for a URL or an existing file)."""
    if db.startswith(("postgresql://", "postgres://")):
        return []
    path = pathlib.Path(db.removeprefix("sqlite:///"))
    if path.exists():
        return []
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def _shown_host(host: str) -> str:
    """The host of the URL to print: this machine's name for a wildcard address (every interface)."""
    if host in ("0.0.0.0", "::", ""):
        import socket

        return socket.gethostname()
    return f"[{host}]" if ":" in host else host


def _cannot_listen(host: str, port: int) -> str:
    """Why a server could not listen on ``host:port`` ("" when it can): checked before the URL is
    announced, with the options uvicorn binds with (SO_REUSEADDR)."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as err:
        return f"unknown host ({err.strerror or err})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                return "the port is in use (another hub or program; pick another --port)"
            return err.strerror or str(err)
    return ""


def _add_policy(args: argparse.Namespace) -> int:
    from ..hub.store import open_store

    store = open_store(args.db)
    store.add_policy(args.name, args.address)
    print(f"policy {args.name} registered")
    return 0


def _add_station(args: argparse.Namespace) -> int:
    from ..hub.database import write_private
    from ..hub.store import open_store

    store = open_store(args.db)
    key = store.add_station(args.station_id, "viewer" if args.viewer else "station")
    write_private(args.key_file, key + "\n")
    print(f"{'viewer' if args.viewer else 'station'} {args.station_id} registered; key written to {args.key_file}")
    return 0


def _revoke(args: argparse.Namespace) -> int:
    from ..hub.store import open_store

    open_store(args.db).revoke_station(args.station_id)
    print(f"key of {args.station_id} revoked")
    return 0


def _export(args: argparse.Namespace) -> int:
    from ..hub.database import write_private
    from ..hub.store import open_store

    lines = [json.dumps(e.to_dict(), sort_keys=True) for e in open_store(args.db).journal()]
    text = "".join(line + "\n" for line in lines)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        write_private(args.output, text)
        print(f"{len(lines)} journal entries written to {args.output}", file=sys.stderr)
    return 0


def _analyze(args: argparse.Namespace) -> int:
    from ..hub.evaluation import journaled, resumed
    from ..hub.export import read_export

    entries = read_export(args.journal)
    policies = sorted(e["body"]["policy"] for e in entries if e["kind"] == "policy_added")
    hub = journaled(entries)
    evaluation = resumed(hub, {name: getattr(args, name)
                               for name in ("method", "alpha", "ranker", "models", "budget", "family")})
    changed = hub.differences(evaluation) if hub is not None else []
    if changed:
        print(f"{args.prog} analyze: a what-if analysis, not the hub's evaluation ({'; '.join(changed)})",
              file=sys.stderr)
    board = evaluation.analyse(policies, entries)
    if args.json:
        print_json(board)
        return 0
    print(f"{board['n_results']} results; ranking by {board['ranker']}")
    for row in board["ranking"]:
        rate = "-" if row["win_rate"] is None else f"{row['win_rate']:.3f}"
        band = "" if row.get("low") is None else f"  score {row['score']:.3f} [{row['low']:.3f}, {row['high']:.3f}]"
        print(f"{row['rank']:>3}. {row['policy']:<24} win rate {rate}  ({row['trials']} trials){band}")
    family = board["family"]
    print(f"pairwise claims: {family['procedure']} over all {family['pairs']} pairs at family-wise level "
          f"{board['alpha']:g}" + (f" (order declared from the warm-up: {' > '.join(family['declared_order'])})"
                                   if family.get("declared_order") else ""))
    for pair in board["pairs"]:
        print(f"{pair['policy_a']} vs {pair['policy_b']}: n {pair['n']}, {pair['decision']}"
              + (f" ({pair['better']} better)" if pair["better"] else ""))
    progress = board["progress"]
    print(f"finished: {progress['reason']}" if progress["finished"] else
          f"not finished: {sum(not a['decided'] for a in progress['adjacent'])} adjacent pair(s) still open")
    return 0


def _station(args: argparse.Namespace) -> int:
    from ..station.client import StationClient, read_key
    from ..station.sim import run_station, sim_runner

    client = StationClient(args.hub, read_key(args.key_file), args.dir)
    acked = run_station(client, args.trials, sim_runner(args.trial_seconds), seed=args.seed,
                        say=lambda line: print(line, flush=True))
    print(f"station done: {acked} result(s) acknowledged by the hub", flush=True)
    return 0


COMMANDS = {"serve": _serve, "add-policy": _add_policy, "add-station": _add_station, "revoke": _revoke,
            "export": _export, "analyze": _analyze, "station": _station}
