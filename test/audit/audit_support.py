"""Helpers of the audit and report tests: a session config, recordings, one-message tampering, and
the installed ``evalstop`` console script (for the CLI tests too).

Recordings come from :func:`evalstop_ros.audit.synthetic.simulate_recording` (a real
EvaluationSession, the messages evaluation_manager publishes) and are written as real bags with
the rosbags writer.  Each tamper function changes exactly one message (or adds one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import pathlib
import shutil
import subprocess
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import pytest

from evalstop_ros.audit.interfaces import typestore
from evalstop_ros.audit.synthetic import Message, SimulatedLab, simulate_recording, write_bag
from evalstop_ros.session import SessionConfig, parse_config

#: Two policies, paired: success by STEP at 0.02 two-sided (shipped n_max 50 table at 0.01),
#: progress by N-SCORE (K = 21) at 0.03.  With RATES both tests decide B_BETTER (STEP at pair 16,
#: N-SCORE at 18; the simulated recording's fixed plan key): 36 trials.
BASE: dict[str, Any] = {
    "policies": ["policy_a", "policy_b"],
    "tasks": [{"id": "push", "description": "Push the block onto the target.",
               "initial_conditions": [{"id": f"c{i}", "reset_instructions": f"Block at spot {i}."} for i in range(3)]}],
    "metrics": [{"name": "success", "method": "step", "alpha": 0.02},
                {"name": "progress", "method": "nscore", "alpha": 0.03, "bins": 21}],
    "alpha": 0.05,
    "n_max": 50,
    "seed": 4,
    "scoring": "operator",
}
RATES = {"policy_a": 0.3, "policy_b": 0.8}
#: A trial whose score both tests consumed (round 4, well before either stop).
TAMPERED = 7


def console_script() -> str:
    """The installed ``evalstop`` console script: beside this interpreter, else on ``$PATH``."""
    beside = pathlib.Path(sys.executable).with_name("evalstop")
    found = str(beside) if beside.is_file() else shutil.which("evalstop")
    if found is None:
        pytest.fail("the `evalstop` console script is not installed (pip install -e .)")
    return found


def cli_in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``evalstop ARGS`` in this process: the console script's parser, dispatch and error handling
    (:func:`evalstop_ros.cli.main.main`) without a fresh interpreter and its imports per call; the
    exit status is what ``main`` returns (or the code of a ``SystemExit`` it lets through), stdout
    and stderr what it wrote. Warnings take Python's default action, as in the console script
    (pytest turns them into errors). :func:`console_script` is the real one."""
    from evalstop_ros.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.simplefilter("default")
        try:
            status = main(list(args))
        except SystemExit as done:
            status = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return subprocess.CompletedProcess(["evalstop", *args], status, out.getvalue(), err.getvalue())


def make_config(**overrides: Any) -> SessionConfig:
    """``BASE`` with top-level keys replaced."""
    return parse_config({**BASE, **overrides})


def recording(scoring: str = "operator", **options: Any) -> list[Message]:
    """The messages of the BASE session with the given scoring."""
    return simulate_recording(make_config(scoring=scoring), SimulatedLab(RATES), **options)


def bag(path: pathlib.Path, messages: Sequence[Message], storage: str) -> pathlib.Path:
    """Write ``messages`` as a bag at ``path``."""
    return write_bag(path, messages, storage=storage)


def _swap_score(success: bool, progress: float) -> tuple[bool, float]:
    """The altered score: the opposite outcome (changes both metrics)."""
    return (not success), round(1.0 - progress, 4)


def alter_wire_score(messages: Sequence[Message], trial_id: int) -> list[Message]:
    """The trial_score message of ``trial_id`` with the opposite outcome."""
    out = []
    for m in messages:
        if m.topic == "trial_score" and m.msg.trial_id == trial_id:
            success, progress = _swap_score(m.msg.success, m.msg.progress)
            m = m._replace(msg=dataclasses.replace(m.msg, success=success, progress=progress))
        out.append(m)
    return out


def alter_journal_score(messages: Sequence[Message], trial_id: int) -> list[Message]:
    """The session_event ``score_accepted`` of ``trial_id`` with the opposite outcome."""
    out = []
    for m in messages:
        if m.topic == "session_event" and m.msg.kind == "score_accepted" and m.msg.trial_id == trial_id:
            payload = json.loads(m.msg.payload_json)
            sub = payload["submission"]
            sub["success"], sub["progress"] = _swap_score(sub["success"], sub["progress"])
            m = m._replace(msg=dataclasses.replace(m.msg, payload_json=json.dumps(payload, sort_keys=True,
                                                                                  separators=(",", ":"))))
        out.append(m)
    return out


def last_trial(messages: Sequence[Message]) -> int:
    """The highest trial id requested."""
    return max(m.msg.trial_id for m in messages if m.topic == "trial_request")


def inject_score_after_stop(messages: Sequence[Message]) -> tuple[list[Message], int]:
    """A trial_score for the next trial id, after the last message; returns it and its trial."""
    trial_id = last_trial(messages) + 1
    stamp = messages[-1].stamp_ns + 1_000_000
    types = typestore().types
    header = types["std_msgs/msg/Header"](
        stamp=types["builtin_interfaces/msg/Time"](sec=stamp // 1_000_000_000, nanosec=stamp % 1_000_000_000),
        frame_id="")
    score = types["evalstop/msg/TrialScore"](header=header, trial_id=trial_id, token="0123456789ab", success=True,
                                             progress=1.0, preference="", notes="late", scorer="operator",
                                             instruction="", pair_invalid=False, counter=0, mac="")
    return [*messages, Message("trial_score", stamp, score)], trial_id


def inject_journal_score_after_stop(messages: Sequence[Message]) -> tuple[list[Message], int]:
    """A session_event ``score_accepted`` for the next trial id, after the session finished."""
    trial_id = last_trial(messages) + 1
    events = [m for m in messages if m.topic == "session_event"]
    template = events[-1].msg
    payload = {"submission": {"notes": "", "operator": "operator", "preference": "", "progress": 1.0,
                              "success": True, "token": "0123456789ab"}}
    event = dataclasses.replace(template, seq=template.seq + 1, kind="score_accepted", trial_id=trial_id,
                                payload_json=json.dumps(payload, sort_keys=True, separators=(",", ":")))
    return [*messages, Message("session_event", messages[-1].stamp_ns + 1_000_000, event)], trial_id


def drop(messages: Sequence[Message], topic: str, trial_id: int, kind: str | None = None) -> list[Message]:
    """Without the one message of ``topic`` (and journal ``kind``) about ``trial_id``."""
    def matches(m: Message) -> bool:
        return (m.topic == topic and m.msg.trial_id == trial_id
                and (kind is None or getattr(m.msg, "kind", None) == kind))

    found = [m for m in messages if matches(m)]
    assert len(found) == 1, f"expected one {topic} message about trial {trial_id}, found {len(found)}"
    return [m for m in messages if not matches(m)]
