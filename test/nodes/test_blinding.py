"""Blinding over DDS: a node subscribed to every evalstop topic learns no label's policy before the end.

Checked against the journal afterwards: the seed published on session_config gives neither the
tokens nor the plan; session_event carries no policy id or token of a request; the key appears
nowhere before the ``key_revealed`` event, which then matches the commitment and replays the plan.
No per-policy running mean is published while the session runs (with the operator's scores by
label it would link labels to policies); every one is published at the end.
"""

from __future__ import annotations

import json
import math
import pathlib
from collections import defaultdict
from typing import Any

import pytest
from nodes_support import final_status, public_view, write_config

pytestmark = pytest.mark.usefixtures("ros_env")


def _everything(probe: Any) -> dict[str, list[Any]]:
    from diagnostic_msgs.msg import DiagnosticArray
    from evalstop.msg import (
        ComparisonStatus,
        ScoreAck,
        SessionConfig,
        SessionEvent,
        SessionStatus,
        TrialRequest,
    )

    from evalstop_ros import qos

    return {
        "session_config": probe.collect(SessionConfig, "session_config", qos.CONFIG_QOS),
        "session_event": probe.collect(SessionEvent, "session_event", qos.JOURNAL_EVENT_QOS),
        "session_status": probe.collect(SessionStatus, "session_status", qos.STATUS_QOS),
        "comparison_status": probe.collect(ComparisonStatus, "comparison_status", qos.COMPARISON_QOS),
        "score_ack": probe.collect(ScoreAck, "score_ack", qos.SCORE_ACK_QOS),
        "trial_request": probe.collect(TrialRequest, "trial_request", qos.TRIAL_REQUEST_QOS),
        "diagnostics": probe.collect(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS_QOS),
    }


def test_an_eavesdropper_cannot_unblind_labels_before_the_end(start_node: Any, probe: Any,
                                                               tmp_path: pathlib.Path) -> None:
    from evalstop_ros.session import load_config, read_journal
    from evalstop_ros.session.blinding import revealed_key
    from evalstop_ros.session.plan import Plan

    config_path = write_config(tmp_path / "session.yaml")
    topics = _everything(probe)
    manager = start_node("evaluation_manager", params={
        "config_file": str(config_path), "session_id": "s1", "journal_dir": str(tmp_path / "journals"),
        "journal_fsync": False, "exit_on_finish": True, "exit_linger": 0.2})
    # the session waits for its runner: start it once the eavesdropper hears the manager (discovery done)
    probe.spin_until(lambda: topics["session_status"] and topics["comparison_status"], 30.0, "the first status")
    start_node("sim_robot", params={"success_rates": [0.3, 0.8], "duration": 0.02})
    final_status(probe, topics["session_status"])
    assert manager.wait() == 0
    journal = read_journal(tmp_path / "journals" / "s1.db")
    probe.spin_until(lambda: len(topics["session_event"]) >= len(journal.events), 10.0, "every journal event")
    config = load_config(config_path)
    requests = {e.trial_id: e.payload for e in journal.events if e.kind == "trial_requested"}
    assert len(requests) >= 4

    # 1. the published seed gives neither the tokens nor, therefore, the plan
    seed_plan = Plan(config)
    assert all(seed_plan.token("s1", t) != p["token"] for t, p in requests.items())
    # 2. no request's policy id or token on session_event; no key anywhere before the reveal
    key_hex = journal.plan_key
    for event in topics["session_event"]:
        payload = json.loads(event.payload_json)
        if event.kind == "trial_requested":
            assert payload["sealed"] is True and "policy_id" not in payload and "token" not in payload
        if event.kind != "key_revealed":
            assert key_hex not in event.payload_json
    for topic, messages in topics.items():
        text = " ".join(str(m) for m in messages if topic != "session_event")
        assert key_hex not in text, topic
    # 3. the operator-visible request names a label, never a policy
    for request in topics["trial_request"]:
        assert request.label in ("", "X", "Y") and not set(str(request).split("'")) & set(config.policies)
    # 4. after the end the revealed key matches the commitment and replays every label and token
    events = [e for e in journal.events]
    key, problem = revealed_key(events, "s1")
    assert key is not None and problem == "" and key.hex() == key_hex
    plan = Plan(config, key)
    for trial_id, payload in requests.items():
        assert plan.label(payload["policy_id"], payload["round"]) == payload["label"]
        assert plan.token("s1", trial_id) == payload["token"]

    # 5. no per-policy means while the session runs (session_status, comparison_status, /diagnostics) ...
    from evalstop.msg import SessionStatus

    over = (SessionStatus.STATE_FINISHED, SessionStatus.STATE_ABORTED)
    running = [s for s in topics["session_status"] if s.state not in over and s.comparisons]
    assert running, "no status of the running session arrived"
    assert all(math.isnan(c.mean_a) and math.isnan(c.mean_b) for s in running for c in s.comparisons)
    for array in topics["diagnostics"]:
        state = next(kv.value for kv in array.status[0].values if kv.key == "state")
        if state in ("running", "paused"):
            means = [kv.value for d in array.status[1:] for kv in d.values if kv.key in ("mean_a", "mean_b")]
            assert means and set(means) == {"nan"}, means
    # ... and every one at the end: the final status, and each comparison_status row's last message
    final = next(s for s in reversed(topics["session_status"]) if s.state in over)
    assert all(math.isfinite(c.mean_a) and math.isfinite(c.mean_b) for c in final.comparisons)

    view = public_view(tmp_path / "journals" / "s1.db")  # stand-ins until the reveal, then the real names

    def rows() -> dict[tuple[str, ...], list[Any]]:
        out: dict[tuple[str, ...], list[Any]] = defaultdict(list)
        for c in topics["comparison_status"]:
            out[(view.restore(c.policy_a), view.restore(c.policy_b), c.metric, c.task)].append(c)
        return out

    probe.spin_until(lambda: len(rows()) == len(final.comparisons)
                     and all(math.isfinite(r[-1].mean_a) for r in rows().values()), 10.0, "the final comparisons")
    for published in rows().values():
        assert all(math.isnan(c.mean_a) and math.isnan(c.mean_b) for c in published[:-1])
        assert all(c.policy_a.startswith("policy:") for c in published[:-1]) and published[-1].policy_a in config.policies
        assert math.isfinite(published[-1].mean_b)
