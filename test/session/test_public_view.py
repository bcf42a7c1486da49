"""The public view of a session (issue 19): until the key is revealed, the operator's channels name
the policies only by stand-ins ``policy:i`` in a sealed order, and the view is exactly invertible
once the real names are published (the audit of a recording)."""

from __future__ import annotations

import hashlib
import json
import os

import session_sim as sim

from evalstop_ros.session import EvaluationSession
from evalstop_ros.session.blinding import seal
from evalstop_ros.session.config import parse_config
from evalstop_ros.session.public_view import PublicView, public_config_json
from evalstop_ros.session.publishing import SessionPublisher

POLICIES = ["pi0_fast_droid", "octo_base", "diffusion_v1"]
RATES = {"pi0_fast_droid": 0.1, "octo_base": 0.9, "diffusion_v1": 0.5}


def _finished_session(tmp_path):
    config = sim.make_config(policies=POLICIES, metrics=[{"name": "success", "method": "nscore"}], n_max=8)
    session = EvaluationSession.open(tmp_path / "s1.db", config, "s1", durable=False)
    session.start()
    sim.drive(session, RATES)
    assert session.state.value == "finished"
    return session


def test_stand_ins_are_a_sealed_stable_permutation():
    policies = [f"p{i}" for i in range(26)]
    key = os.urandom(32)
    view = PublicView(policies, key, "s1")
    assert sorted(view.standins.values()) == sorted(f"policy:{i}" for i in range(1, 27))
    assert PublicView(policies, key, "s1").standins == view.standins  # stable for the session (restarts)
    # the order comes from the secret key (and the session): another key or session, another order
    assert PublicView(policies, os.urandom(32), "s1").standins != view.standins
    assert PublicView(policies, key, "s2").standins != view.standins
    assert [view.standins[p] for p in policies] != [f"policy:{i}" for i in range(1, 27)]  # not config order


def test_text_replaces_whole_identifiers_only_and_restores_exactly():
    view = PublicView(["pi0", "pi0.5", "octo"], bytes(32), "s1")
    s = view.standins
    text = "comparison pi0 vs pi0.5 (success); octo. pi01 xpi0 pi0-b /pi0 'octo'"
    public = view.text(text)
    assert public == f"comparison {s['pi0']} vs {s['pi0.5']} (success); {s['octo']}. pi01 xpi0 pi0-b /pi0 '{s['octo']}'"
    assert view.restore(public) == text
    assert view.text(public) == public  # idempotent


def test_field_names_that_are_also_policy_ids_stay_field_names():
    # the node tests' default policies are called policy_a and policy_b, like ComparisonStatus's fields
    view = PublicView(["policy_a", "policy_b"], bytes(32), "s1")
    row = {"policy_a": "policy_a", "policy_b": "policy_b", "metric": "success", "n": 3}
    public = view.fields("session_status", {"session_id": "s1", "comparisons": [row], "active_policies": ["policy_b"]})
    (published,) = public["comparisons"]
    assert set(published) == set(row) and published["n"] == 3 and published["metric"] == "success"
    assert {published["policy_a"], published["policy_b"]} == {"policy:1", "policy:2"}
    assert public["active_policies"] == [view.standins["policy_b"]]
    assert view.restore_value(public["comparisons"]) == [row]


def test_a_policy_named_like_a_stand_in_gets_another_prefix():
    view = PublicView(["policy:1", "policy:2"], bytes(32), "s1")
    assert set(view.standins.values()) == {"_policy:1", "_policy:2"}
    assert view.restore(view.text("policy:1 vs policy:2")) == "policy:1 vs policy:2"
    assert "policy:1" not in view.text("policy:2").replace("_policy:", "")


def test_every_published_event_is_free_of_policy_ids_and_restores_exactly(tmp_path):
    session = _finished_session(tmp_path)
    view = PublicView(session.config.policies, session.plan.key, "s1")
    events = session.events()
    reveal = next(e.seq for e in events if e.kind == "key_revealed")
    assert any(e.kind == "decision" for e in events if e.seq < reveal)
    for event in events:
        if event.seq >= reveal:
            continue
        sealed = seal(event.kind, event.payload)
        public = view.event_payload(event.kind, sealed)
        text = json.dumps(public, ensure_ascii=False)
        assert not any(p in text for p in POLICIES), (event.kind, text)
        assert view.event_payload(event.kind, public) == public
        assert view.restore_event_payload(event.kind, public, session.config.config_hash) == sealed, event.kind
        if event.kind == "decision":
            assert {public["policy_a"], public["policy_b"]} <= set(view.standins.values())
        if event.kind == "config":  # the hash of the public config: no dictionary attack on the names
            assert public["config_hash"] == hashlib.sha256(json.dumps(
                public["config"], sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
            assert public["config_hash"] != session.config.config_hash
            assert public["key_commitment"] == sealed["key_commitment"]
    session.close()


def test_the_manager_s_messages_through_the_view_name_no_policy(tmp_path):
    session = _finished_session(tmp_path)
    view = PublicView(session.config.policies, session.plan.key, "s1")
    sent: list[tuple[str, dict]] = []
    publisher = SessionPublisher(lambda topic, fields, stamp: sent.append((topic, view.fields(topic, fields))))
    publisher.config(session, "0")
    for event in session.events():
        publisher.event("s1", event)
    publisher.status(session)
    publisher.ack("s1", 3, sim.ScoreOutcome(False, False, "pi0_fast_droid is no label"))
    topics = {topic for topic, _ in sent}
    assert {"session_config", "session_event", "session_status", "comparison_status", "score_ack"} <= topics
    for topic, fields in sent:
        text = json.dumps(fields, ensure_ascii=False, default=str)
        assert not any(p in text for p in POLICIES), (topic, text)
    config = next(f for t, f in sent if t == "session_config")
    assert config["config_hash"] == hashlib.sha256(config["config_json"].encode()).hexdigest()
    assert config["session_id"] == "s1"
    public = parse_config(json.loads(config["config_json"]))  # still a valid design, names replaced
    assert sorted(public.policies) == sorted(view.standins.values())
    assert config["config_json"] == public_config_json(session.config.canonical_json(), view)
    status = next(f for t, f in sent if t == "session_status")
    assert set(status["letter_policies"]) <= set(view.standins.values())
    session.close()
