"""The recorded topics, their QoS and message definitions agree with the ROS package."""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from evalstop_ros.audit.interfaces import TOPICS, message_definitions, msg_dir, typestore

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_every_topic_type_is_defined() -> None:
    store = typestore()
    for topic in TOPICS:
        assert topic.msgtype in store.fielddefs, topic


def test_definitions_hash_like_rosidl() -> None:
    # The bag metadata's RIHS01 hashes must equal what rosidl computed for the built package.
    share = REPO / "build" / "ros" / "install" / "share" / "evalstop" / "msg"
    built = sorted(share.glob("*.json"))
    if not built:
        if os.environ.get("EVALSTOP_ROS_REQUIRED"):
            pytest.fail("the ROS package is not built (make ros)")
        pytest.skip("the ROS package is not built (make ros)")
    store = typestore()
    for path in built:
        hashes = {h["type_name"]: h["hash_string"] for h in json.loads(path.read_text())["type_hashes"]}
        name = f"evalstop/msg/{path.stem}"
        assert store.hash_rihs01(name) == hashes[name], name
    assert msg_dir() is not None and set(message_definitions()) >= {t.msgtype for t in TOPICS}


def test_recorder_qos_equals_the_publishers() -> None:
    try:
        from evalstop_ros import qos
        from evalstop_ros.audit.recorder import topic_qos
    except ImportError as err:  # rclpy loads only inside tools/ros/env.sh
        if os.environ.get("EVALSTOP_ROS_REQUIRED"):
            raise
        pytest.skip(f"rclpy unavailable: {err}")

    publishers = {"trial_request": qos.TRIAL_REQUEST_QOS, "trial_score": qos.SCORE_QOS,
                  "score_ack": qos.SCORE_ACK_QOS, "session_status": qos.STATUS_QOS,
                  "comparison_status": qos.COMPARISON_QOS, "session_config": qos.CONFIG_QOS,
                  "session_event": qos.JOURNAL_EVENT_QOS}
    assert sorted(publishers) == sorted(t.name for t in TOPICS)
    for topic in TOPICS:
        mine, theirs = topic_qos(topic), publishers[topic.name]
        assert (mine.history, mine.reliability, mine.durability) == \
            (theirs.history, theirs.reliability, theirs.durability), topic.name
        if mine.history == qos.HistoryPolicy.KEEP_LAST:
            assert mine.depth == theirs.depth, topic.name


def test_bag_qos_overrides_file_matches_the_topics() -> None:
    # config/bag_qos_overrides.yaml is what docs/recording.md tells `ros2 bag record` to use.
    import yaml

    overrides = yaml.safe_load((REPO / "config" / "bag_qos_overrides.yaml").read_text())
    assert sorted(overrides) == sorted(f"/{t.name}" for t in TOPICS)
    for topic in TOPICS:
        entry = overrides[f"/{topic.name}"]
        assert (entry["history"], entry["reliability"], entry["durability"]) == \
            (topic.history, "reliable", topic.durability), topic.name
        assert entry.get("depth", 0) == topic.depth, topic.name
