"""What the evaluation manager publishes for a session, as plain field mappings (no ROS).

One place decides what goes on each topic and when, for the node and the audit's simulated
recordings alike; the topics are in docs/session.md and docs/ros.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from typing import Any

from .blinding import seal
from .journal import Event
from .session import EvaluationSession
from .values import (
    FINAL,
    STATE_CODES,
    ClaimSnapshot,
    ComparisonSnapshot,
    PendingTrial,
    ScoreOutcome,
    SessionState,
)

__all__ = ["STATE_CODES", "Diagnostic", "SessionPublisher", "diagnostics"]

#: Journal kinds after which the comparisons (and letters) may have changed.
SCORE_CHANGES = frozenset({"score_accepted", "post_decision_score", "correction", "void", "decision"})

Fields = dict[str, Any]
#: ``send(topic, fields, stamp_ns)``: publish one message; ``stamp_ns`` is the header stamp to use
#: (the journal's time of a ``session_event``), ``None`` for "now".
Send = Callable[[str, Fields, "int | None"], None]


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def comparison_fields(c: ComparisonSnapshot, *, blind: bool = False) -> Fields:
    """``ComparisonStatus`` message fields of one test or claim row (NaN where undefined).

    ``blind``: withhold the per-policy means (NaN), as while the session runs.
    """
    if blind:
        c = dataclasses.replace(c, mean_a=math.nan, mean_b=math.nan)
    return {
        "policy_a": c.policy_a, "policy_b": c.policy_b, "metric": c.metric, "method": c.method,
        "alpha": float(c.alpha), "n": int(c.n), "decision": int(c.decision), "pvalue": _nan(c.pvalue),
        "evalue": _nan(c.evalue), "mean_a": _nan(c.mean_a), "mean_b": _nan(c.mean_b),
        "stopping_trial": c.stopping_trial or 0, "task": c.task,
    }


def request_fields(trial: PendingTrial, runner: str = "") -> Fields:
    """``TrialRequest`` message fields: what the operator may see (no policy id).  With several runners
    the reset instructions start with the runner (the arm) whose scene to reset and score."""
    prompt = trial.operator_prompt()
    fields = {"round": trial.round, **dataclasses.asdict(prompt), "round_labels": list(prompt.round_labels)}
    if runner:
        fields["reset_instructions"] = f"On {runner}: {prompt.reset_instructions}"
    return fields


class SessionPublisher:
    """Decides what to publish after each step of a session and hands it to ``send``.

    :param send: ``send(topic, fields, stamp_ns)`` publishes one message (topic names as in the
        module docstring; see :data:`Send`).
    """

    def __init__(self, send: Send) -> None:
        self._send = send
        self._requested: set[tuple[int, int]] = set()  # (trial, attempt) published: each once (latched history)
        self._comparison_keys: list[tuple[int, int, bool]] = []
        self._changes = 0  # score-changing events seen: the comparisons are recomputed only then
        self._memo: tuple[int, list[ComparisonSnapshot], dict[str, str]] | None = None

    def reset(self) -> None:
        """Forget what was published (a new or resumed session: publish everything again)."""
        self._comparison_keys, self._memo = [], None
        self._requested.clear()

    def config(self, session: EvaluationSession, version: str) -> None:
        """``session_config``: the pre-registered design."""
        cfg = session.config
        self._send("session_config", {"session_id": session.session_id, "config_json": cfg.canonical_json(),
                                      "config_hash": cfg.config_hash, "version": version}, None)

    def event(self, session_id: str, event: Event) -> None:
        """``session_event``: one journal event (its stamp is ``event.stamp_ns``)."""
        self._changes += event.kind in SCORE_CHANGES
        self._send("session_event", {
            "session_id": session_id, "seq": event.seq, "kind": event.kind, "trial_id": event.trial_id or 0,
            "payload_json": json.dumps(seal(event.kind, event.payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False)},
            event.stamp_ns)

    def request(self, trial: PendingTrial, runner: str = "") -> None:
        """``trial_request``, once per trial and attempt (``runner``: the one it goes to, with several,
        :func:`request_fields`; the topic's latched history keeps every open trial's for a late terminal)."""
        key = (trial.trial_id, trial.attempt)
        if key not in self._requested:
            self._send("trial_request", request_fields(trial, runner), None)
            self._requested.add(key)

    def station_status(self, fields: Fields) -> None:
        """Publish ``SessionStatus`` fields built by a hub station's work
        (:meth:`~evalstop_ros.station.work.StationWork.status_fields`)."""
        self._send("session_status", fields, None)

    def end(self, session_id: str) -> None:
        """``trial_request`` with ``trial_id`` 0: nothing is pending any more."""
        self._send("trial_request", {
            "session_id": session_id, "trial_id": 0, "round": 0, "attempt": 0, "label": "", "task": "",
            "task_description": "", "initial_condition": "", "reset_instructions": "", "token": "",
            "round_labels": []}, None)
        self._requested.add((0, 0))

    def ack(self, session_id: str, trial_id: int, outcome: ScoreOutcome, *, scorer: str = "", counter: int = 0,
            mac: Callable[[Fields], str] | None = None) -> None:
        """``score_ack``: the reason is empty for a plain acceptance.

        ``scorer`` and ``counter`` name the score answered; ``mac(fields)`` signs the answer
        (:meth:`.auth.Gate.sign_answer`) when the score was authenticated.
        """
        plain = outcome.accepted and not (outcome.duplicate or outcome.post_decision or outcome.held)
        fields: Fields = {"session_id": session_id, "trial_id": int(trial_id), "accepted": outcome.accepted,
                          "duplicate": outcome.duplicate, "reason": "" if plain else outcome.reason,
                          "scorer": scorer, "counter": int(counter)}
        fields["mac"] = mac(fields) if mac is not None else ""
        self._send("score_ack", fields, None)

    def idle(self) -> None:
        """``session_status`` of a manager without a session."""
        self._send("session_status", {"session_id": "", "state": STATE_CODES[SessionState.IDLE], "state_name": "idle",
                                      "trials_done": 0, "budget_left": 0, "pending_trial_id": 0,
                                      "active_policies": [], "active_tasks": [], "comparisons": [],
                                      "letter_policies": [], "letters": []}, None)

    def rows(self, session: EvaluationSession) -> tuple[list[ComparisonSnapshot], dict[str, str]]:
        """The tests, then one row per multi-task claim, and the letters (recomputed after a score change)."""
        if self._memo is None or self._memo[0] != self._changes:
            claims: list[ClaimSnapshot] = session.claims()
            rows = [*session.comparisons(), *(claim.as_comparison() for claim in claims)]
            self._memo = (self._changes, rows, session.letters())
        return self._memo[1], self._memo[2]

    def status(self, session: EvaluationSession) -> None:
        """``session_status``, then ``comparison_status`` for each row whose n or decision changed."""
        status = session.status()
        rows, letters = self.rows(session)
        blind = status.state not in FINAL
        comparisons = [comparison_fields(c, blind=blind) for c in rows]
        running = status.state == SessionState.RUNNING
        self._send("session_status", {
            "session_id": session.session_id, "state": STATE_CODES[status.state],
            "state_name": f"{status.state.value}:awaiting_{status.awaiting}" if status.awaiting and running
            else status.state.value,
            "trials_done": status.trials_scored, "budget_left": status.max_trials_left,
            "pending_trial_id": status.pending_trial_id or 0, "active_policies": list(status.active_policies),
            "active_tasks": list(status.active_tasks), "comparisons": comparisons,
            "letter_policies": list(letters), "letters": list(letters.values())}, None)
        keys = [(c["n"], c["decision"], blind) for c in comparisons]  # the end re-sends every row, with means
        for index, (fields, key) in enumerate(zip(comparisons, keys)):
            before = self._comparison_keys[index] if index < len(self._comparison_keys) else None
            if key != before:
                self._send("comparison_status", fields, None)
        self._comparison_keys = keys


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    """One ``diagnostic_msgs/DiagnosticStatus``: ``level`` 0 OK, 1 WARN, 2 ERROR."""

    level: int
    name: str
    message: str
    hardware_id: str
    values: tuple[tuple[str, str], ...]


OK, WARN, ERROR = 0, 1, 2


def diagnostics(session: EvaluationSession | None, *, node: str, hardware_id: str, runner: str,
                max_attempts: int, extra: tuple[tuple[str, str], ...] = ()) -> list[Diagnostic]:
    """The manager's ``/diagnostics``: the session, then one entry per comparison.

    ``runner`` says what the runner link is doing (``""`` when nothing is wrong, else e.g.
    ``"waiting for the runner action server"`` or ``"re-sending the goal"``).  The session
    entry is WARN while waiting for the runner, paused or retrying, and ERROR once the session
    paused after ``max_attempts`` runner faults in a row; ``name`` is ``<node>: session`` and
    ``hardware_id`` the robot's runner.  ``extra`` values (e.g. the authentication counters) are
    appended to the session entry's.
    """
    session_name = f"{node}: session"
    if session is None:
        return [Diagnostic(OK, session_name, "idle: waiting for a start_session request", hardware_id, extra)]
    status = session.status()
    faults = session.runner_faults
    level, message = OK, f"{status.state.value}, {status.trials_scored} trials scored"
    faulty, arm = session.faulty_run()  # several runners: the trial that failed, on its arm
    if status.state == SessionState.PAUSED and faults >= max_attempts:
        where = f"runner {arm}" if arm else "the runner"
        level, message = ERROR, f"paused: {where} failed {faults} times in a row on trial {faulty or status.pending_trial_id}"
    elif status.state == SessionState.PAUSED:
        level, message = WARN, f"paused: {runner}" if runner else "paused"
    elif status.state == SessionState.ABORTED:
        level, message = WARN, "aborted"
    elif status.state == SessionState.RUNNING and (runner or faults):
        level = WARN
        message = runner or f"retrying trial {status.pending_trial_id} after {faults} runner fault(s)"
    if status.state == SessionState.RUNNING and status.awaiting == "reset":
        message += f"; trial {status.pending_trial_id} waits for the operator's scene reset"
    values = (("state", status.state.value), ("trials_scored", str(status.trials_scored)),
              ("trials_voided", str(status.trials_voided)), ("pending_trial_id", str(status.pending_trial_id or 0)),
              ("awaiting", status.awaiting or ""), ("runner_faults", str(faults)), ("runner", runner or "ok"),
              ("max_trials_left", str(status.max_trials_left)),
              ("comparisons_decided", f"{status.comparisons_decided}/{status.comparisons_total}"),
              ("scores_rejected", str(session.rejections)),
              ("session_id", session.session_id), *extra)
    out = [Diagnostic(level, session_name, message, hardware_id, values)]
    for c in session.comparisons():
        if status.state not in FINAL:  # the means would link labels to policies (module docstring)
            c = dataclasses.replace(c, mean_a=math.nan, mean_b=math.nan)
        out.append(Diagnostic(
            WARN if c.decision == 3 else OK,
            f"{node}: {c.policy_a} vs {c.policy_b} ({c.metric}{', task ' + c.task if c.task else ''})",
            f"{c.decision.name} after {c.n} pairs", hardware_id,
            tuple((k, str(v)) for k, v in (
                ("method", c.method), ("alpha", c.alpha), ("n", c.n), ("decision", c.decision.name),
                ("pvalue", c.pvalue), ("evalue", c.evalue), ("mean_a", c.mean_a), ("mean_b", c.mean_b),
                ("stopping_trial", c.stopping_trial or 0)))))
    return out
