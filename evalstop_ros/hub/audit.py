"""Audit of a hub export (``evalstop audit journal.jsonl``): the hash chain, the protocol, every station's uploads, the leaderboard.

What each check covers: docs/hub.md ("Audit of a hub export") and docs/hub_server.md.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

from ..session.errors import JournalError
from .chain import OLD_CHAIN, check_chain
from .errors import HubError
from .evaluation import KIND, Evaluation
from .export import read_export
from .leaderboard import leaderboard
from .rankings import MODELS
from .station_journal import read_station_journal

__all__ = ["HubAudit", "audit_export"]


@dataclasses.dataclass
class HubAudit:
    """What :func:`audit_export` found: ``problems`` empty means VERIFIED."""

    source: str
    entries: int
    results: int
    stations: list[str]
    problems: list[str]
    board: dict[str, Any]
    #: What is worth saying and is not a problem (a station journal written before chaining).
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def verified(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "hub export", "source": self.source, "verified": self.verified, "entries": self.entries,
                "results": self.results, "stations": self.stations, "problems": self.problems, "notes": self.notes,
                "leaderboard": self.board}


def _evaluation(entries: Sequence[Mapping[str, Any]]) -> tuple[Evaluation | None, list[str], list[str]]:
    """``(the journaled evaluation or None, problems, notes)``."""
    found = [e for e in entries if e["kind"] == KIND]
    if not found:
        return None, [], ["the export journals no evaluation (a hub from before evaluations were journaled): "
                          "re-derived with `evalstop hub serve`'s defaults"]
    problems = [f"entry seq {e['seq']}: a second evaluation (the hub journals one, on its first start)"
                for e in found[1:]]
    notes = []
    first_result = next((e["seq"] for e in entries if e["kind"] == "result"), None)
    if first_result is not None and first_result < found[0]["seq"]:
        notes.append(f"the evaluation was journaled at seq {found[0]['seq']}, after the first result (seq "
                     f"{first_result}): a hub from before evaluations were journaled")
    try:
        return Evaluation.from_body(found[0]["body"]), problems, notes
    except HubError as err:
        return None, [*problems, f"entry seq {found[0]['seq']}: {err}"], notes


def _protocol(entries: Sequence[Mapping[str, Any]], tasks: Sequence[str] | None) -> list[str]:
    problems: list[str] = []
    policies: set[str] = set()
    assigned: dict[str, Mapping[str, Any]] = {}
    handed_again: set[str] = set()
    reported: set[str] = set()
    for e in entries:
        body, seq = e["body"], e["seq"]
        if e["kind"] == "policy_added":
            policies.add(body["policy"])
        elif e["kind"] == "assigned":
            unknown = {body["policy_a"], body["policy_b"]} - policies
            if unknown:
                problems.append(f"entry seq {seq}: assignment {body['assignment']} names unregistered {sorted(unknown)}")
            if tasks is not None and body["task"] not in tasks:
                problems.append(f"entry seq {seq}: assignment {body['assignment']} has task {body['task']!r}, "
                                f"not one of the evaluation's {list(tasks)}")
            if body.get("requeue_of"):
                handed_again.add(body["requeue_of"])
            assigned[body["assignment"]] = body
        elif e["kind"] == "result":
            name = body["assignment"]
            lease = assigned.get(name)
            if lease is None:
                problems.append(f"entry seq {seq}: result (upload {body['upload_id']}) for assignment {name}, "
                                "never handed out")
                continue
            fields = ("station", "policy_a", "policy_b", "task")
            wrong = [f for f in fields if lease[f] != body[f]]
            if wrong:
                problems.append(f"entry seq {seq}: result (upload {body['upload_id']}) differs from its assignment "
                                f"{name} in {', '.join(wrong)}")
            if name in reported:
                problems.append(f"entry seq {seq}: a second result for assignment {name} (upload {body['upload_id']})")
            if name in handed_again:
                problems.append(f"entry seq {seq}: result (upload {body['upload_id']}) for assignment {name}, whose "
                                "trial had been handed out again")
            reported.add(name)
    return problems


def _station_records(directory: pathlib.Path) -> tuple[pathlib.Path, list[dict[str, Any]], list[str], str | None]:
    """``(file, records, problems, station id)`` of a station directory's journal (or a journal file),
    ``station.db``, by the standard chain check (its ``opened`` event names the station)."""
    try:
        contents = read_station_journal(directory)
    except JournalError as err:
        raise HubError(f"cannot read the station journal {directory}: {err}") from err
    path = contents.path
    problems = []
    if contents.chain_break is not None:
        edited = contents.chain_break
        record = next((r for r in contents.records if r["seq"] == edited.seq), {})
        upload = f" (upload {record['upload_id']})" if "upload_id" in record else ""
        problems.append(f"{path}: {edited.describe()}{upload}")
    problems += [f"{path}: {problem}" for problem in (contents.truncated, contents.head_problem) if problem]
    named = contents.opened.get("station_id")
    return path, contents.records, problems, str(named) if named else None


def _station(directory: pathlib.Path,
             results: Mapping[tuple[str, str], Mapping[str, Any]]) -> tuple[str, list[str]]:
    """``(station id, problems)`` of one station's local journal: its chain, and its results
    against the hub's (``results`` by station and upload id: upload ids are a station's own)."""
    path, records, problems, named = _station_records(directory)
    acked = {r["upload_id"] for r in records if r.get("kind") == "ack"}
    sent = {r["upload_id"]: r for r in records if r.get("kind") == "result"}
    if named is not None:
        station = named
    else:  # a journal without its opened event: the hub's results tell
        ids = sorted({s for s, u in results if u in sent})
        station = ids[0] if len(ids) == 1 else "?"
        if len(ids) > 1:
            problems.append(f"{path}: its uploads are counted for several stations at the hub: {ids}")
    for upload, record in sent.items():
        theirs = results.get((station, upload))
        if theirs is None:
            if upload in acked:
                problems.append(f"{path}: upload {upload} was acknowledged but the hub's journal has no such result")
            continue
        mine = (record["assignment_id"], float(record["score_a"]), float(record["score_b"]))
        held = (theirs["assignment"], float(theirs["score_a"]), float(theirs["score_b"]))
        if mine != held:
            problems.append(f"{path}: upload {upload} edited: the station journaled assignment {mine[0]}, "
                            f"A {mine[1]:g}, B {mine[2]:g}; the hub's journal holds assignment {held[0]}, "
                            f"A {held[1]:g}, B {held[2]:g}")
    for owner, upload in results:
        if owner == station and upload not in sent:
            problems.append(f"{path}: the hub counts upload {upload} of station {station}, which the station "
                            "never journaled")
    return station, problems


def _against(entries: Sequence[Mapping[str, Any]], policies: Sequence[str], published: Mapping[str, Any],
             evaluation: Evaluation | None) -> list[str]:
    """The published leaderboard against the journaled evaluation and the one re-derived from the entries it had seen."""
    problems = []
    try:
        upto = int(published["as_of_seq"])
        design = str((published.get("family") or {}).get("design", "all-pairs"))  # (older boards: all-pairs)
        if evaluation is not None:
            shown = {"method": published["method"], "alpha": float(published["alpha"]), "ranker": published["ranker"],
                     "models": tuple(published.get("models") or MODELS),
                     "budget": int((published.get("progress") or {}).get("budget") or 0), "family": design}
            problems += [f"leaderboard: published with {name} {value!r}, the hub's journaled evaluation has "
                         f"{getattr(evaluation, name)!r}" for name, value in shown.items()
                         if value != getattr(evaluation, name)]
        board = leaderboard(policies, [e for e in entries if e["seq"] <= upto], method=published["method"],
                            alpha=float(published["alpha"]), ranker=published["ranker"],
                            models=tuple(published.get("models") or MODELS),
                            budget=int((published.get("progress") or {}).get("budget") or 0), family=design)
    except (KeyError, TypeError, ValueError) as err:
        raise HubError(f"the leaderboard to check against is not a hub leaderboard: {err}") from err
    if board["n_results"] != published.get("n_results"):
        problems.append(f"leaderboard: {published.get('n_results')} results published, {board['n_results']} in the "
                        f"journal up to seq {upto}")
    order = [row["policy"] for row in board["ranking"]]
    if order != [row.get("policy") for row in published.get("ranking", [])]:
        problems.append(f"leaderboard: published order {[r.get('policy') for r in published.get('ranking', [])]}, "
                        f"re-derived {order}")
    decided = {(p["policy_a"], p["policy_b"]): (p["decision"], p["better"]) for p in board["pairs"]}
    for pair in published.get("pairs", []):
        key = (str(pair.get("policy_a")), str(pair.get("policy_b")))
        claim = (str(pair.get("decision")).upper(), pair.get("better"))  # (older exports: lower case)
        if decided.get(key) != claim:
            problems.append(f"leaderboard: {key[0]} vs {key[1]} published {claim}, re-derived {decided.get(key)}")
    return problems


def audit_export(path: str | pathlib.Path, stations: Sequence[str | pathlib.Path] = (),
                 against: Mapping[str, Any] | None = None) -> HubAudit:
    """Audit the export at ``path`` (see the module docstring); input errors raise :class:`HubError`."""
    entries = read_export(path)
    problems = []
    broken, chain = check_chain(entries)
    if broken is not None:
        problems.append(broken)
    evaluation, found, notes = _evaluation(entries)
    if chain == OLD_CHAIN:
        notes.insert(0, "the export is chained by the old link of a hub before schema version 4 (no sequence "
                        "numbers hashed); checked by that chain")
    problems += found
    problems += _protocol(entries, evaluation.tasks if evaluation is not None else None)
    results = {(e["body"]["station"], e["body"]["upload_id"]): e["body"] for e in entries if e["kind"] == "result"}
    names: list[str] = []
    for directory in stations:
        name, found = _station(pathlib.Path(directory), results)
        names.append(name)
        problems += found
    policies = sorted(e["body"]["policy"] for e in entries if e["kind"] == "policy_added")
    if against is not None:
        problems += _against(entries, policies, against, evaluation)
        board = dict(against)
    else:
        board = (evaluation or Evaluation()).analyse(policies, entries) if len(policies) >= 2 else {}
    return HubAudit(str(path), len(entries), len(results), names, problems, board, notes)
