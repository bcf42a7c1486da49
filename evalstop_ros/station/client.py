"""A station's side of the hub, without ROS: ask for work, run it, journal locally, upload.

:class:`StationClient` keeps the station's local journal -- the standard journal
(:mod:`~evalstop_ros.hub.station_journal`: SQLite, one durable transaction per record, hash-chained, locked against
a second writer, private), ``DIR/station.db`` -- and writes every result there *before*
uploading it. :meth:`StationClient.sync` uploads the results not yet acknowledged, in journal
order, each with its own ``upload_id``, so a retry after a lost answer or a hub restart is
acknowledged by the hub as a duplicate and counted once. When the hub is unreachable the results
stay in the local journal and the next :meth:`~StationClient.sync` sends them; nothing is lost
when the station itself is killed, because a restarted station reads its journal again.

A station's trials are a :class:`~.session.StationSession`, driven by the session's trial
loop; :class:`~.work.StationWork` talks to the hub for it in the background.
"""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from typing import Any

from ..hub.errors import HubError
from ..hub.sim_address import SIM_ADDRESS, sim_address_rate
from ..hub.station_journal import (
    JOURNAL,
    StationJournal,
    check_no_json_lines,
    open_station_journal,
    read_station_journal,
)
from ..session.errors import JournalError
from ..session.journal_files import journal_directory

__all__ = ["ARMS", "SIM_ADDRESS", "StationClient", "read_key", "read_records", "sim_address_rate"]

#: The two arms of an A/B assignment, run in this order.
ARMS = ("A", "B")
KEY_ENV = "EVALSTOP_HUB_KEY"


def read_key(key_file: str | None) -> str:
    """The station's API key from ``key_file`` or ``$EVALSTOP_HUB_KEY`` (never from a flag)."""
    if key_file:
        try:
            key = pathlib.Path(key_file).read_text(encoding="utf-8").strip()
        except OSError as err:
            raise HubError(f"cannot read the key file {key_file!r}: {err.strerror}") from err
    else:
        key = os.environ.get(KEY_ENV, "").strip()
    if not key:
        raise HubError(f"no API key: pass --key-file or set {KEY_ENV}")
    return key


def read_records(directory: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """A station's records, read-only (safe while it runs): its journal ``station.db``, else none.
    :class:`HubError` if the journal cannot be read, or the directory is an earlier version's."""
    folder = pathlib.Path(directory)
    try:
        check_no_json_lines(folder)
        return read_station_journal(folder / JOURNAL).records if (folder / JOURNAL).exists() else []
    except (JournalError, OSError) as err:
        raise HubError(f"cannot read the station journal in {str(folder)!r}: {err}") from err


class StationClient:
    """HTTP client of one station with a crash-safe local journal of its results."""

    def __init__(self, hub_url: str, key: str, directory: str | os.PathLike[str], timeout: float = 10.0) -> None:
        self.hub_url = hub_url.rstrip("/")
        self._key = key
        self.timeout = timeout
        try:
            self.directory = journal_directory(directory)
        except JournalError as err:
            raise HubError(f"station directory: {err}") from err
        self.journal_path = self.directory / JOURNAL
        self._journal: StationJournal | None = None

    def __repr__(self) -> str:  # never shows the key
        return f"StationClient({self.hub_url!r}, directory={str(self.directory)!r})"

    # -- HTTP -----------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """JSON request to the hub. A refusal raises :class:`HubError` with the hub's status and
        reason; an unreachable hub raises :class:`HubError` with status 503 -- also a hub that
        died in the middle of its answer (a torn status line, body or JSON document) and any
        5xx answer (a hub or a load balancer in front of several that cannot answer now), so a
        station retries instead of crashing. Every wait is bounded by ``timeout`` seconds."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.hub_url + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self._key}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as answer:
                payload = answer.read()
        except urllib.error.HTTPError as err:
            try:
                reason = json.loads(err.read()).get("error", err.reason)
            except (ValueError, AttributeError, OSError, http.client.HTTPException):
                reason = err.reason
            if err.code >= 500:  # a hub that cannot answer now (a load balancer's 502/504 too): retried
                raise HubError(f"hub {self.hub_url} unavailable: {method} {path} answered {err.code} ({reason})",
                               503) from err
            raise HubError(f"hub refused {method} {path}: {reason}", err.code) from err
        except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
            raise HubError(f"hub {self.hub_url} unreachable: {getattr(err, 'reason', None) or err}", 503) from err
        try:
            return json.loads(payload or b"null")
        except ValueError as err:
            raise HubError(f"hub {self.hub_url} unreachable: its answer to {method} {path} was cut short", 503) from err

    # -- local journal --------------------------------------------------------------------
    def open_journal(self, station_id: str) -> StationJournal:
        """Open (or create) the local journal of ``station_id``
        as its writer: a second writer on the directory is refused. :class:`HubError` if it cannot."""
        if self._journal is not None:
            if self._journal.station_id != station_id:
                raise HubError(f"{self.journal_path} is open for station {self._journal.station_id!r}, "
                               f"not {station_id!r}")
            return self._journal
        try:
            self._journal = open_station_journal(self.directory, station_id)
        except JournalError as err:
            raise HubError(f"station journal: {err}") from err
        return self._journal

    @property
    def journal(self) -> StationJournal:
        """The local journal, opened as its writer on first use (the station id: the directory's name)."""
        return self._journal if self._journal is not None else self.open_journal(self.directory.name)

    def close(self) -> None:
        """Close the local journal and release its lock (idempotent; a later append opens it again)."""
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def append(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Append ``record`` (its ``kind`` and fields) to the local journal; durable (fsync'ed)
        and chained when this returns; returns it with its ``seq`` and time ``at``.
        :class:`HubError` if it cannot be journaled."""
        fields = {k: v for k, v in record.items() if k != "kind"}
        try:
            return self.journal.append(str(record.get("kind")), **fields)
        except JournalError as err:
            raise HubError(f"station journal: {err}") from err

    def records(self) -> list[dict[str, Any]]:
        """The local journal's records in order (through the writer when open, else read-only: :func:`read_records`)."""
        if self._journal is not None and not self._journal.closed:
            try:
                return self._journal.records()
            except JournalError as err:
                raise HubError(f"station journal: {err}") from err
        return read_records(self.directory)

    def journal_size(self) -> int:
        """Events in the open journal (grows with every append); -1 when it is not open here."""
        return self._journal.size if self._journal is not None and not self._journal.closed else -1

    def pending(self) -> list[dict[str, Any]]:
        """Results journaled locally and not yet settled with the hub, in order."""
        records = self.records()
        settled = {r["upload_id"] for r in records if r["kind"] in ("ack", "rejected")}
        return [r for r in records if r["kind"] == "result" and r["upload_id"] not in settled]

    def lease(self) -> dict[str, Any]:
        """Ask the hub for work (an assignment and its runner ticket; see :meth:`resolve`)."""
        return dict(self.request("POST", "/v1/work"))

    def resolve(self, work: Mapping[str, Any]) -> dict[str, str]:
        """Resolve the runner ticket of leased ``work`` to the policy-server addresses of arms
        ``A`` and ``B`` (the station's session journals the lease, :meth:`~.session.StationSession.assign`)."""
        addresses = self.request("POST", "/v1/tickets/resolve", {"ticket": work["runner_ticket"]})
        if not isinstance(addresses, dict) or any(not isinstance(addresses.get(arm), str) for arm in ARMS):
            raise HubError("the hub's ticket answer has no address for arms A and B", 502)
        return {arm: addresses[arm] for arm in ARMS}

    def record_result(self, assignment_id: str, score_a: float, score_b: float) -> str:
        """Journal a result locally (before any upload); returns its upload id."""
        upload_id = uuid.uuid4().hex
        self.append({"kind": "result", "assignment_id": assignment_id, "upload_id": upload_id,
                      "score_a": score_a, "score_b": score_b})
        return upload_id

    def sync(self) -> int:
        """Upload the pending results in order; returns how many remain (hub unreachable).

        A result the hub refuses for good (its lease expired and was requeued) is journaled as
        ``rejected`` with the hub's reason and kept locally; any other refusal is raised.
        """
        pending = self.pending()
        for i, record in enumerate(pending):
            body = {"upload_id": record["upload_id"], "score_a": record["score_a"], "score_b": record["score_b"]}
            try:
                answer = self.request("POST", f"/v1/assignments/{record['assignment_id']}/result", body)
            except HubError as err:
                if err.status == 503:
                    return len(pending) - i
                if err.status != 410:
                    raise
                self.append({"kind": "rejected", "upload_id": record["upload_id"], "reason": str(err)})
                continue
            self.append({"kind": "ack", "upload_id": record["upload_id"], "status": answer["status"]})
        return 0


    def renew(self, assignment_id: str) -> None:
        """Extend the lease while a long trial runs; an unreachable hub is not an error here
        (the result is journaled anyway and counts if the trial was not handed out again)."""
        try:
            self.request("POST", f"/v1/assignments/{assignment_id}/renew")
        except HubError as err:
            if err.status not in (503, 410):
                raise
