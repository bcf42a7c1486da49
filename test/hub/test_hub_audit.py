"""`evalstop audit` of a hub export: the hash chain, the protocol, each station's
uploads against its own journal, and the published leaderboard re-derived.

A real hub process on SQLite and two simulated station processes produce the record; then it is
tampered with as an insider would: an exported entry edited, an upload's scores changed with the
chain recomputed (only the station's journal can tell), a counted result removed, a published
decision changed. Each is named; the untouched record verifies.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from audit_support import cli_in_process
from hub_support import HubProcess, Station, call, cli, register_hub, stop_all

from evalstop_ros.hub.chain import GENESIS, HUB_GENESIS, body_text, entry_hash, link
from evalstop_ros.hub.station_journal import JOURNAL, JSON_LINES, read_station_journal

#: One record of a real hub process and two station processes (module fixture) audited many ways:
#: the first audit through the console script in a child process, the others in this process (the
#: same parser and dispatch without an interpreter per audit); left to `make test` (``slow``).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A finished hub run: its export, the saved leaderboard and the two stations' directories."""
    root = tmp_path_factory.mktemp("hub_audit")
    db = str(root / "hub.sqlite")
    keys, viewer = register_hub(db, {"alpha": 0.9, "beta": 0.5, "gamma": 0.1}, ("s1", "s2"))
    hub = HubProcess(db, viewer, root, ["--tasks", "towel,cup", "--seed", "3"])
    stations = [Station(name, hub.url, root, key, n) for n, (name, key) in enumerate(keys.items())]
    try:
        hub.start()
        for station in stations:
            station.start()
        for station in stations:
            assert station.proc is not None and station.proc.wait(timeout=600) == 0, station.log()
        export = root / "journal.jsonl"
        assert cli("hub", "export", "--db", db, "-o", str(export)).returncode == 0
        status, board = call(hub.url + "/v1/leaderboard", key=viewer)
        assert status == 200
        saved = root / "leaderboard.json"
        saved.write_text(json.dumps(board))
        yield {"root": root, "export": export, "board": saved, "stations": [s.dir for s in stations]}
    finally:
        stop_all(hub, stations)


def _audit(export: pathlib.Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = cli_in_process("audit", str(export), "--json", *extra)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def _entries(export: pathlib.Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in export.read_text().splitlines()]


def _write(path: pathlib.Path, entries: list[dict[str, Any]], rechain: bool) -> pathlib.Path:
    """Write ``entries`` as an export; ``rechain``: renumber the entries and recompute every link
    (the standard chain hashes the numbers), as a forger who knows the algorithm would."""
    previous = HUB_GENESIS
    for seq, entry in enumerate(entries, start=1):
        if rechain:
            entry["seq"] = seq
            entry["hash"] = previous = entry_hash(previous, seq, entry["at"], entry["kind"], body_text(entry["body"]))
    path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in entries))
    return path


def test_the_untouched_record_verifies(record: dict[str, Any]) -> None:
    stations = [f"--station={d}" for d in record["stations"]]
    status, report = _audit(record["export"], "--against", str(record["board"]), *stations)
    assert status == 0 and report["verified"] and report["problems"] == [] and report["notes"] == []
    assert report["results"] == 24 and sorted(report["stations"]) == ["s1", "s2"]
    done = cli("audit", str(record["export"]), *stations)
    assert done.returncode == 0 and done.stdout.strip().endswith("VERIFIED")
    assert "24 results, 2 station journal(s)" in done.stdout


def test_an_edited_entry_breaks_the_chain(record: dict[str, Any]) -> None:
    entries = _entries(record["export"])
    result = next(e for e in entries if e["kind"] == "result")
    result["body"]["score_a"] = 1.0 - result["body"]["score_a"]
    status, report = _audit(_write(record["root"] / "edited.jsonl", entries, rechain=False))
    assert status == 1
    assert report["problems"] == [f"entry seq {result['seq']} (result) does not match the hash chain: edited, or an "
                                  "entry before it was removed or changed"]


def test_an_export_of_a_v3_hub_verifies_by_its_old_chain_with_a_note(record: dict[str, Any]) -> None:
    """The same record as a hub before schema version 4 exported it (the old link, sequence
    numbers not hashed) verifies, with its stations, and says which chain it is; an edited entry
    is still named."""
    entries = _entries(record["export"])
    previous = GENESIS
    for entry in entries:
        entry["hash"] = previous = link(previous, entry["at"], entry["kind"], body_text(entry["body"]))
    old = _write(record["root"] / "v3.jsonl", entries, rechain=False)
    done = cli_in_process("audit", str(old), *(f"--station={d}" for d in record["stations"]))
    assert done.returncode == 0 and done.stdout.strip().endswith("VERIFIED"), done.stdout
    assert "note: the export is chained by the old link of a hub before schema version 4" in done.stdout
    result = next(e for e in entries if e["kind"] == "result")
    result["body"]["score_b"] = 1.0 - result["body"]["score_b"]
    status, report = _audit(_write(record["root"] / "v3-edited.jsonl", entries, rechain=False))
    assert status == 1 and report["problems"] == [
        f"entry seq {result['seq']} (result) does not match the hash chain: edited, or an entry before it was "
        "removed or changed"]


def test_a_forged_upload_is_named_by_its_station(record: dict[str, Any]) -> None:
    entries = _entries(record["export"])
    result = next(e for e in entries if e["kind"] == "result" and e["body"]["station"] == "s2")
    upload = result["body"]["upload_id"]
    result["body"]["score_b"] = 1.0 - result["body"]["score_b"]
    forged = _write(record["root"] / "forged.jsonl", entries, rechain=True)
    assert _audit(forged)[0] == 0  # a chain recomputed by the forger holds: the stations' journals are the witness
    status, report = _audit(forged, *(f"--station={d}" for d in record["stations"]))
    assert status == 1 and len(report["problems"]) == 1
    assert f"upload {upload} edited" in report["problems"][0] and "station.db" in report["problems"][0]


def test_a_removed_result_is_missed_by_its_station(record: dict[str, Any]) -> None:
    entries = _entries(record["export"])
    dropped = next(e for e in entries if e["kind"] == "result" and e["body"]["station"] == "s1")
    kept = [e for e in entries if e is not dropped]
    status, report = _audit(_write(record["root"] / "dropped.jsonl", kept, rechain=True),
                            *(f"--station={d}" for d in record["stations"]))
    assert status == 1
    assert report["problems"] == [f"{record['stations'][0] / 'station.db'}: upload {dropped['body']['upload_id']} "
                                  "was acknowledged but the hub's journal has no such result"]


def test_a_published_decision_that_the_journal_does_not_give_is_named(record: dict[str, Any]) -> None:
    board = json.loads(record["board"].read_text())
    board["ranking"] = board["ranking"][::-1]
    board["pairs"][0]["decision"], board["pairs"][0]["better"] = "A_BETTER", board["pairs"][0]["policy_a"]
    altered = record["root"] / "altered.json"
    altered.write_text(json.dumps(board))
    status, report = _audit(record["export"], "--against", str(altered))
    assert status == 1
    assert any(p.startswith("leaderboard: published order") for p in report["problems"])
    pair = board["pairs"][0]
    assert any(p.startswith(f"leaderboard: {pair['policy_a']} vs {pair['policy_b']} published") for p in report["problems"])


def test_a_result_for_work_never_handed_out_is_a_protocol_violation(record: dict[str, Any]) -> None:
    entries = _entries(record["export"])
    result = next(e for e in entries if e["kind"] == "result")
    entries.append({"seq": entries[-1]["seq"] + 1, "at": entries[-1]["at"] + 1, "kind": "result",
                    "body": {**result["body"], "assignment": "made-up", "upload_id": "upload-made-up"}})
    status, report = _audit(_write(record["root"] / "extra.jsonl", entries, rechain=True))
    assert status == 1
    assert report["problems"] == [f"entry seq {entries[-1]['seq']}: result (upload upload-made-up) for assignment "
                                  "made-up, never handed out"]


def test_the_journaled_evaluation_governs_the_audit(record: dict[str, Any]) -> None:
    """The hub journals its evaluation once, before any result; a leaderboard published under
    another level or method, a second evaluation, or work on a task outside the evaluation is
    named; an export without one (a hub from before) audits under the defaults, with a note."""
    entries = _entries(record["export"])
    kinds = [e["kind"] for e in entries]
    assert kinds.count("evaluation") == 1 and kinds.index("evaluation") < kinds.index("result")
    assert entries[kinds.index("evaluation")]["body"]["tasks"] == ["towel", "cup"]

    board = json.loads(record["board"].read_text())
    board["alpha"], board["method"] = 0.2, "wsr"
    shopped = record["root"] / "shopped.json"
    shopped.write_text(json.dumps(board))
    status, report = _audit(record["export"], "--against", str(shopped))
    assert status == 1 and {"leaderboard: published with method 'wsr', the hub's journaled evaluation has 'mixture'",
                            "leaderboard: published with alpha 0.2, the hub's journaled evaluation has 0.05"} <= \
        set(report["problems"])

    again = [dict(e) for e in entries]
    evaluation = next(e for e in again if e["kind"] == "evaluation")
    again.append({**evaluation, "seq": again[-1]["seq"] + 1, "at": again[-1]["at"] + 1,
                  "body": {**evaluation["body"], "alpha": 0.2}})
    status, report = _audit(_write(record["root"] / "twice.jsonl", again, rechain=True))
    assert status == 1 and report["problems"] == [f"entry seq {again[-1]['seq']}: a second evaluation (the hub "
                                                  "journals one, on its first start)"]

    elsewhere = [dict(e) for e in entries]
    assigned = next(e for e in elsewhere if e["kind"] == "assigned")
    assigned["body"] = {**assigned["body"], "task": "sofa"}
    status, report = _audit(_write(record["root"] / "sofa.jsonl", elsewhere, rechain=True))
    assert status == 1 and (f"entry seq {assigned['seq']}: assignment {assigned['body']['assignment']} has task "
                            "'sofa', not one of the evaluation's ['towel', 'cup']") in report["problems"]

    before = [e for e in entries if e["kind"] != "evaluation"]
    status, report = _audit(_write(record["root"] / "before.jsonl", before, rechain=True))
    assert status == 0 and report["notes"] == ["the export journals no evaluation (a hub from before evaluations "
                                               "were journaled): re-derived with `evalstop hub serve`'s defaults"]


def _station_copy(record: dict[str, Any], name: str, edit: str = "",
                  legacy: list[dict[str, Any]] | None = None) -> pathlib.Path:
    """A copy of station s1's directory; ``edit``: SQL run on its journal with the append-only
    triggers dropped, as an insider would; ``legacy``: its journal replaced by the ``station.jsonl``
    of an earlier development version holding these records."""
    copy = record["root"] / name
    shutil.copytree(record["stations"][0], copy)
    if edit:
        connection = sqlite3.connect(copy / JOURNAL)
        for table in ("events", "meta"):
            for action in ("update", "delete"):
                connection.execute(f"DROP TRIGGER {table}_no_{action}")
        connection.execute(edit)
        connection.commit()
        connection.close()
    if legacy is not None:
        for file in copy.glob(JOURNAL + "*"):
            file.unlink()
        (copy / JSON_LINES).write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in legacy))
    return copy


def test_each_station_journal_is_the_standard_journal(record: dict[str, Any]) -> None:
    for directory in record["stations"]:
        contents = read_station_journal(directory)
        assert {r["kind"] for r in contents.records} >= {"leased", "result", "ack"}
        assert (contents.chain_break, contents.truncated, contents.head_problem) == (None, "", "")
        assert contents.station_id == directory.name and contents.opened == {"station_id": directory.name}


def test_an_edited_or_removed_station_event_is_named(record: dict[str, Any]) -> None:
    """Any event, not only a result: a ``leased`` event's task edited, an ``ack`` removed from the
    middle, the last events removed -- each named by the standard chain check (the event, as
    ``read_journal``'s ``chain_break``) or the head file; the hub's side still agrees."""
    records = read_station_journal(record["stations"][0]).records
    leased = next(r for r in records if r["kind"] == "leased" and r["seq"] > 2)
    edited = _station_copy(record, "s1-edited", "UPDATE events SET payload = json_set(payload, '$.task', 'elsewhere') "
                                                f"WHERE seq = {leased['seq']}")
    status, report = _audit(record["export"], f"--station={edited}")
    assert status == 1 and report["problems"] == [
        f"{edited / JOURNAL}: event {leased['seq']} (leased) does not match the journal's hash chain: it was edited "
        "after it was written (or an event before it was removed)"]

    ack = next(r for r in records if r["kind"] == "ack")
    removed = _station_copy(record, "s1-removed", f"DELETE FROM events WHERE seq = {ack['seq']}")
    status, report = _audit(record["export"], f"--station={removed}")
    after = next(r for r in records if r["seq"] == ack["seq"] + 1)
    upload = f" (upload {after['upload_id']})" if "upload_id" in after else ""
    assert status == 1 and report["problems"][0] == (
        f"{removed / JOURNAL}: event {after['seq']} ({after['kind']}) does not match the journal's hash chain: it was "
        f"edited after it was written (or an event before it was removed){upload}")

    cut = _station_copy(record, "s1-cut", f"DELETE FROM events WHERE seq > {records[-1]['seq'] - 2}")
    status, report = _audit(record["export"], f"--station={cut}")
    assert status == 1 and any("the head file records" in p and "a truncated journal" in p
                               for p in report["problems"])


def test_a_station_directory_of_an_earlier_version_is_refused_with_a_clear_error(record: dict[str, Any]) -> None:
    """A station directory holding the JSON lines journal an earlier development version wrote
    (``station.jsonl``) is not audited as if it were a journal: an input error naming the file."""
    old = [{k: v for k, v in r.items() if k not in ("at", "seq")}
           for r in read_station_journal(record["stations"][0]).records]
    copy = _station_copy(record, "s1-old", legacy=old)
    done = cli_in_process("audit", str(record["export"]), f"--station={copy}")
    assert done.returncode == 2 and "holds station.jsonl, the journal of an earlier development version" in done.stderr
