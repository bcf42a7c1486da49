"""Reading sources: bags of either storage and any namespace, journals, and what cannot be audited."""

from __future__ import annotations

import json
import pathlib
import sqlite3
from typing import Any

import pytest
import yaml
from audit_support import BASE, bag, recording
from rosbags.rosbag2 import StoragePlugin, Writer

from evalstop_ros.audit import AuditError, audit, read_source
from evalstop_ros.audit.interfaces import typestore
from evalstop_ros.audit.synthetic import rewrite_bag, write_bag


@pytest.fixture(scope="module")
def operator() -> list[Any]:
    return recording("operator")


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_bag_records_equal_across_storages(operator: list[Any], tmp_path: pathlib.Path, storage: str) -> None:
    record = read_source(bag(tmp_path / "bag", operator, storage))
    other = read_source(bag(tmp_path / "other", operator, "mcap" if storage == "sqlite3" else "sqlite3"))
    assert record.storage == storage
    fields = ("session_id", "configs", "events", "event_positions", "requests", "scores", "acks", "statuses", "states",
              "topic_counts", "start_ns", "end_ns")
    assert [repr(getattr(record, f)) for f in fields] == [repr(getattr(other, f)) for f in fields]  # NaN-safe
    assert dict(record.topic_counts)["trial_score"] == 36


def test_file_inside_a_bag_reads_the_bag(operator: list[Any], tmp_path: pathlib.Path) -> None:
    path = bag(tmp_path / "bag", operator, "mcap")
    (data,) = path.glob("*.mcap")
    assert read_source(data).source == str(path)


def test_namespaces_are_found_and_chosen(operator: list[Any], tmp_path: pathlib.Path) -> None:
    write_bag(tmp_path / "one", operator, storage="mcap", namespace="/lab1")
    assert audit(tmp_path / "one").verified  # one namespace: found by type, whatever its name
    both = tmp_path / "both"
    rewrite_bag(tmp_path / "one", both, lambda topic, stamp, msg: [(stamp, msg)])
    _add_namespace(tmp_path / "one", both, "/lab2")
    with pytest.raises(AuditError, match=r"2 namespaces \['/lab1', '/lab2'\]; choose one with --namespace"):
        read_source(both)
    assert audit(both, namespace="/lab2").verified


def _add_namespace(source: pathlib.Path, target: pathlib.Path, namespace: str) -> None:
    """Append a copy of every topic under another namespace to the bag at ``target``."""
    copy = target.with_name("copy")
    rewrite_bag(source, copy, lambda topic, stamp, msg: [(stamp, msg)])
    merged = target.with_name("merged")
    from rosbags.highlevel import AnyReader

    store = typestore()
    with Writer(merged, version=9, storage_plugin=StoragePlugin.MCAP) as writer, \
            AnyReader([target]) as first, AnyReader([copy]) as second:
        for reader, prefix in ((first, None), (second, namespace)):
            conns = {c.id: writer.add_connection(c.topic if prefix is None else prefix + "/" + c.topic.rsplit("/", 1)[1],
                                                 c.msgtype, typestore=store) for c in reader.connections}
            for conn, stamp, raw in reader.messages():
                writer.write(conns[conn.id], stamp, raw)
    import shutil

    shutil.rmtree(target)
    merged.rename(target)


def test_bag_without_session_config_needs_config(operator: list[Any], tmp_path: pathlib.Path) -> None:
    path = bag(tmp_path / "bag", [m for m in operator if m.topic != "session_config"], "mcap")
    with pytest.raises(AuditError, match="no session configuration in the bag .*; pass --config FILE"):
        audit(path)
    from audit_support import make_config

    report = audit(path, config=make_config())
    assert report.verified and report.config_origin == "--config (not in the bag)"
    other = audit(bag(tmp_path / "full", operator, "mcap"), config=make_config(seed=5))
    assert [v.code for v in other.violations] == ["config_mismatch"]  # --config must agree with the bag's


def test_bag_without_evalstop_topics(tmp_path: pathlib.Path) -> None:
    store = typestore()
    with Writer(tmp_path / "bag", version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/chatter", "std_msgs/msg/String", typestore=store)
        writer.write(conn, 1, store.serialize_cdr(store.types["std_msgs/msg/String"](data="hi"), "std_msgs/msg/String"))
    with pytest.raises(AuditError, match=r"no evalstop topic in the bag \(types found: \['std_msgs/msg/String'\]\)"):
        read_source(tmp_path / "bag")


def test_bag_without_message_definitions_uses_ours(operator: list[Any], tmp_path: pathlib.Path) -> None:
    # Bags of older rosbag2 versions carry no definitions; the installed .msg files fill in.
    path = bag(tmp_path / "bag", operator, "sqlite3")
    (db,) = path.glob("*.db3")
    with sqlite3.connect(db) as connection:
        connection.execute("DELETE FROM message_definitions")
        connection.execute("UPDATE topics SET type_description_hash = ''")
    assert audit(path).verified


def test_not_a_source(tmp_path: pathlib.Path) -> None:
    with pytest.raises(AuditError, match="no such file or directory"):
        read_source(tmp_path / "missing")
    with pytest.raises(AuditError, match="a directory without metadata.yaml is not a rosbag2 bag"):
        read_source(tmp_path)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(AuditError, match="not a session journal|file is not a database"):
        read_source(tmp_path / "notes.txt")


def test_metadata_lists_the_qos_and_definitions(operator: list[Any], tmp_path: pathlib.Path) -> None:
    # What `ros2 bag info` / `ros2 bag play` read: topics with type, serialization and offered QoS.
    meta = yaml.safe_load((bag(tmp_path / "bag", operator, "mcap") / "metadata.yaml").read_text())
    info = meta["rosbag2_bagfile_information"]
    assert info["version"] == 9 and info["storage_identifier"] == "mcap"
    topics = {t["topic_metadata"]["name"]: t["topic_metadata"] for t in info["topics_with_message_count"]}
    status = topics["/session_status"]
    assert status["type"] == "evalstop/msg/SessionStatus" and status["serialization_format"] == "cdr"
    assert status["type_description_hash"].startswith("RIHS01_")
    (qos,) = status["offered_qos_profiles"]
    assert (qos["durability"], qos["reliability"], qos["depth"]) == ("transient_local", "reliable", 1)


def test_cli_input_errors_exit_2(operator: list[Any], tmp_path: pathlib.Path, evalstop: Any) -> None:
    path = bag(tmp_path / "bag", [m for m in operator if m.topic != "session_config"], "mcap")
    for args, fragment in (
        (("audit", str(path)), "no session configuration in the bag"),
        (("audit", str(tmp_path / "missing")), "no such file or directory"),
        (("audit", str(path), "--config", str(tmp_path / "none.yaml")), "cannot read the file"),
        (("report", str(path), "-o", str(tmp_path / "out")), "no session configuration in the bag"),
    ):
        done = evalstop(*args)
        assert done.returncode == 2, done
        assert done.stdout == ""
        assert done.stderr.startswith(f"evalstop {args[0]}: error: ") and done.stderr.count("\n") == 1, done.stderr
        assert fragment in done.stderr


def test_cli_with_config_file(operator: list[Any], tmp_path: pathlib.Path, audit_json: Any) -> None:
    path = bag(tmp_path / "bag", [m for m in operator if m.topic != "session_config"], "mcap")
    (tmp_path / "session.yaml").write_text(yaml.safe_dump(BASE))
    status, payload = audit_json(path, "--config", str(tmp_path / "session.yaml"))
    assert status == 0 and payload["verified"] and payload["config_origin"] == "--config (not in the bag)"
    assert json.dumps(payload)  # plain JSON, no NaN
