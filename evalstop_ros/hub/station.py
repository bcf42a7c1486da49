"""A station's side of the hub, without ROS: ask for work, run it, journal locally, upload.

:class:`StationClient` keeps a local append-only journal (JSON lines, flushed and fsync'ed,
hash-chained like the hub's journal: each record's ``hash`` links it to the one before, see
:func:`.chain.check_records`) and writes every result there *before* uploading it. :meth:`StationClient.sync` uploads the
results not yet acknowledged, in journal order, each with its own ``upload_id``, so a retry
after a lost answer or a hub restart is acknowledged by the hub as a duplicate and counted
once. When the hub is unreachable the results stay in the local journal and the next
:meth:`~StationClient.sync` sends them; nothing is lost when the station itself is killed,
because a restarted station reads its journal again.

A station's work (leases, trials, scores) is :class:`~.work.StationWork`, driven by the session's
trial loop: by the manager node's hub mode, or by :func:`~.sim_station.run_station` for a
simulated station.
"""

from __future__ import annotations

import http.client
import json
import os
import pathlib
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from typing import Any

from .chain import GENESIS, record_link
from .errors import HubError

__all__ = ["ARMS", "SIM_ADDRESS", "StationClient", "read_key", "sim_address_rate"]

#: Name of the local journal inside a station's directory.
JOURNAL = "station.jsonl"
#: The two arms of an A/B assignment, run in this order.
ARMS = ("A", "B")
KEY_ENV = "EVALSTOP_HUB_KEY"
#: Address prefix of a simulated policy server, ``sim://success=P``.
SIM_ADDRESS = "sim://success="


def sim_address_rate(address: str) -> float | None:
    """The success probability ``P`` of a simulated policy server ``sim://success=P`` (``None``:
    not such an address, or ``P`` not in [0, 1]). Used by :func:`.sim_station.sim_runner` and ``sim_robot``.

    >>> sim_address_rate("sim://success=0.85"), sim_address_rate("policy_a"), sim_address_rate("sim://success=2")
    (0.85, None, None)
    """
    if not address.startswith(SIM_ADDRESS):
        return None
    try:
        rate = float(address.removeprefix(SIM_ADDRESS))
    except ValueError:
        return None
    return rate if 0.0 <= rate <= 1.0 else None


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


def read_journal(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """A station's local journal (``station.jsonl``), in order; a torn last line (a station killed
    mid-write) is ignored. :class:`OSError` if it cannot be read."""
    out = []
    for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            break
    return out


class StationClient:
    """HTTP client of one station with a crash-safe local journal of its results."""

    def __init__(self, hub_url: str, key: str, directory: str | os.PathLike[str], timeout: float = 10.0) -> None:
        self.hub_url = hub_url.rstrip("/")
        self._key = key
        self.timeout = timeout
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.journal_path = self.directory / JOURNAL
        self._append_lock = threading.Lock()  # the hub thread and the node append to one chain
        self._last_hash: str | None = None  # link of the last record, once read

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
    def append(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Append ``record`` (its ``kind`` and fields) to the local journal with its time ``at``
        and its ``hash``, the link to the record before (:func:`.chain.record_link`; the first
        hashed record of a journal links to :data:`.chain.GENESIS`, records of a journal written
        before stations chained stay unchained before it). Flushed and fsync'ed; returns it."""
        with self._append_lock:
            if self._last_hash is None:
                self._drop_torn_line()
                hashed = [r["hash"] for r in self.records() if isinstance(r.get("hash"), str)]
                self._last_hash = hashed[-1] if hashed else GENESIS
            full = {**record, "at": time.time()}
            full["hash"] = record_link(self._last_hash, full)
            with open(self.journal_path, "a", encoding="utf-8") as out:
                out.write(json.dumps(full, sort_keys=True) + "\n")
                out.flush()
                os.fsync(out.fileno())
            self._last_hash = full["hash"]
        return full

    def _drop_torn_line(self) -> None:
        """Cut a torn last line (a station killed mid-write: never acknowledged, :func:`read_journal`
        ignores it), so that the next record starts on a line of its own and is read."""
        try:
            with open(self.journal_path, "rb+") as journal:
                data = journal.read()
                if data and not data.endswith(b"\n"):
                    journal.truncate(data.rfind(b"\n") + 1)
                    os.fsync(journal.fileno())
        except FileNotFoundError:
            pass

    def records(self) -> list[dict[str, Any]]:
        """The local journal (:func:`read_journal`)."""
        return read_journal(self.journal_path) if self.journal_path.exists() else []

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
        ``A`` and ``B``, and journal the lease: from here on the station holds the work (a
        ``leased`` record without its ``result`` is an assignment the station started)."""
        addresses = self.request("POST", "/v1/tickets/resolve", {"ticket": work["runner_ticket"]})
        if not isinstance(addresses, dict) or any(not isinstance(addresses.get(arm), str) for arm in ARMS):
            raise HubError("the hub's ticket answer has no address for arms A and B", 502)
        self.append({"kind": "leased", "assignment_id": work["assignment_id"], "task": work["task"],
                      "lease_deadline": work["lease_deadline"]})
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
