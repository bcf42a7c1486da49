"""Helpers of the node tests: session configs and waiting on the manager's topics.

Nothing here imports rclpy at module level (pytest imports this file for its doctests).
"""

from __future__ import annotations

import math
import os
import pathlib
import re
import signal
import subprocess
import time
from typing import Any

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]


def _install_prefix() -> pathlib.Path:
    """``EVALSTOP_ROS_INSTALL`` (``make test`` sets it), else the first prefix on ``AMENT_PREFIX_PATH`` that has
    the package (a sourced ROS workspace: ``colcon test``), else ``build/ros/install``."""
    if os.environ.get("EVALSTOP_ROS_INSTALL"):
        return REPO / os.environ["EVALSTOP_ROS_INSTALL"]
    for prefix in filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        if (pathlib.Path(prefix) / "share" / "evalstop" / "package.xml").is_file():
            return pathlib.Path(prefix)
    return REPO / "build" / "ros" / "install"


#: Install prefix of the ROS package under test: ``build/ros/install`` (Kilted, ``make ros``), as ``make
#: test`` sets it for the Jazzy run ``build/ros-jazzy/install``, or a ROS workspace's ``install``.
INSTALL = _install_prefix()
#: Node executables (``install(PROGRAMS ...)`` in CMakeLists.txt).
LIB = INSTALL / "lib" / "evalstop"

#: A two-policy paired session: success by STEP, progress by N-SCORE (K = 21), 0.05 each
#: (family-wise 0.1). Two-sided STEP at 0.05 uses the per-direction 0.025 table, which ships
#: for n_max 50/100/200/500 (nothing is synthesized during a test); sim_robot scores the rollouts.
BASE_CONFIG: dict[str, Any] = {
    "policies": ["policy_a", "policy_b"],
    "tasks": [{
        "id": "push",
        "description": "Push the block onto the target.",
        "initial_conditions": [{"id": f"c{i}", "reset_instructions": f"Block at spot {i}."} for i in range(3)],
    }],
    "metrics": [{"name": "success", "method": "step", "alpha": 0.05},
                {"name": "progress", "method": "nscore", "alpha": 0.05, "bins": 21}],
    "alpha": 0.1,
    "n_max": 50,
    "seed": 4,
    "runner": {"action_name": "run_trial", "timeout_s": 20.0},
    "scoring": "auto",
}


def write_config(path: pathlib.Path, **overrides: Any) -> pathlib.Path:
    """``BASE_CONFIG`` with top-level keys replaced, as YAML at ``path``; returns ``path``.

    >>> import tempfile
    >>> p = write_config(pathlib.Path(tempfile.mkdtemp()) / "c.yaml", n_max=10)
    >>> yaml.safe_load(p.read_text())["n_max"]
    10
    """
    path.write_text(yaml.safe_dump({**BASE_CONFIG, **overrides}, sort_keys=False))
    return path


def same_float(a: float, b: float, rel: float = 1e-12) -> bool:
    """Equal floats, NaN equal to NaN.

    >>> same_float(float("nan"), float("nan")), same_float(1.0, 1.0 + 1e-15), same_float(1.0, 2.0)
    (True, True, False)
    """
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=rel, abs_tol=0.0)


def comparison_key(c: Any) -> tuple[Any, ...]:
    """What must not change between two runs of one session: a ComparisonStatus without floats."""
    return (c.policy_a, c.policy_b, c.metric, c.method, c.n, c.decision, c.stopping_trial)


def engine_session(journal: pathlib.Path, config: Any, session_id: str, plan_key: bytes, seed: int,
                   rates: dict[str, float], progress_mean: float, concentration: float = 8.0) -> list[Any]:
    """A session run to its end below ROS, as the manager runs it: its trial loop (``TrialDriver``)
    on the engine, journaled at ``journal``, every run ok and scored as sim_robot (``seed``, success
    ``rates`` per policy, ``progress_mean``) scores it (``simulate_outcome``). Its final comparison
    rows (tests, then claims), with the fields of a ``ComparisonStatus``."""
    from types import SimpleNamespace

    from evalstop_ros.nodes.sim_robot import simulate_outcome
    from evalstop_ros.session import EvaluationSession
    from evalstop_ros.session.driver import Action, TrialDriver
    from evalstop_ros.session.publishing import comparison_fields

    with EvaluationSession.open(journal, config, session_id, plan_key=plan_key) as session:
        session.start()
        driver = TrialDriver(session)
        while (upcoming := driver.advance()).action is not Action.DONE:
            trial = upcoming.trial
            assert upcoming.action is Action.RUN and trial is not None, upcoming
            outcome = simulate_outcome(seed, session_id, trial.policy_id, trial.trial_id,
                                       success_rate=rates[trial.policy_id], progress_mean=progress_mean,
                                       concentration=concentration)
            driver.run_done(trial, True, 0.0, auto_score=(outcome.success, outcome.progress))
        assert session.state.value == "finished", session.state
        rows = [*session.comparisons(), *(claim.as_comparison() for claim in session.claims())]
    return [SimpleNamespace(**comparison_fields(row)) for row in rows]


def public_view(journal_path: pathlib.Path) -> Any:
    """The session's :class:`~evalstop_ros.session.public_view.PublicView`, as the journal's owner
    rebuilds it (its config and key): ``.restore(name)`` turns a stand-in back into the policy."""
    import json

    from evalstop_ros.session.journal import read_journal
    from evalstop_ros.session.public_view import PublicView

    journal = read_journal(journal_path)
    return PublicView(json.loads(journal.config_json)["policies"], bytes.fromhex(journal.plan_key),
                      journal.session_id)


def final_status(probe: Any, statuses: list[Any], timeout: float = 120.0) -> Any:
    """Spin until a FINISHED/ABORTED SessionStatus arrives in ``statuses``; return it."""
    from evalstop.msg import SessionStatus

    final = (SessionStatus.STATE_FINISHED, SessionStatus.STATE_ABORTED)
    return probe.spin_until(lambda: next((s for s in reversed(statuses) if s.state in final), None), timeout,
                            "a final session status")


def operator_keys(directory: pathlib.Path, *operators: str) -> tuple[pathlib.Path, dict[str, pathlib.Path]]:
    """Fresh keys for ``operators``: the manager's key file and one key file per operator.

    >>> import tempfile
    >>> manager, clients = operator_keys(pathlib.Path(tempfile.mkdtemp()), "alice", "auto:runner")
    >>> sorted(clients), len(manager.read_text().splitlines())
    (['alice', 'auto:runner'], 3)
    """
    from evalstop_ros.session.auth import new_keys, write_keys

    keys = new_keys(operators)
    clients = {op: write_keys(directory / f"{op.replace(':', '_')}.key", {op: key}) for op, key in keys.items()}
    return write_keys(directory / "operators.keys", keys), clients


class NodeProcess:
    """One node executable running as a process, its output (stdout + stderr) in a log file."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log_path: pathlib.Path,
                 stdin: int | None = subprocess.DEVNULL) -> None:
        self.name = name
        self.cmd = cmd
        self.log_path = log_path
        self._log = log_path.open("ab")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT, stdin=stdin)

    @property
    def output(self) -> str:
        """Everything the process printed so far."""
        return self.log_path.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 20.0, *, count: int = 1) -> re.Match[str]:
        """Wait until the output matches regex ``pattern`` ``count`` times; return the last match.

        Fails the test (with the output) on timeout or if the process exits first.
        """
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            matches = list(regex.finditer(self.output))
            if len(matches) >= count:
                return matches[count - 1]
            if self.proc.poll() is not None:
                matches = list(regex.finditer(self.output))
                if len(matches) >= count:
                    return matches[count - 1]
                pytest.fail(f"{self.name} exited ({self.proc.returncode}) before printing {pattern!r}:\n{self.output}")
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name}: no {pattern!r} (x{count}) within {timeout} s:\n{self.output}")
            time.sleep(0.05)

    def wait(self, timeout: float = 30.0) -> int:
        """Wait for the process to exit by itself; return its exit code."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.name} still running after {timeout} s:\n{self.output}")

    def interrupt(self) -> None:
        """Ctrl-C (SIGINT) the process if it still runs, without waiting: :meth:`finish` then waits, so
        that several nodes shut down at once."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)

    def stop(self, timeout: float = 15.0) -> int:
        """Ctrl-C (SIGINT) the process, wait for it, and return its exit code (SIGKILL after timeout)."""
        self.interrupt()
        return self.finish(timeout)

    def finish(self, timeout: float = 15.0) -> int:
        """Wait for the process to end (SIGKILL after ``timeout``) and return its exit code; no second
        Ctrl-C after :meth:`interrupt`."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        if self.proc.returncode != 0:  # shown by pytest with the failing assertion
            print(f"{self.name} exited with {self.proc.returncode}; the end of its log:\n{self.tail()}")
        return self.proc.returncode

    def tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the process's output."""
        return "\n".join(self.output.splitlines()[-lines:])

    def kill(self) -> None:
        """SIGKILL (``kill -9``): no clean-up of any kind in the process."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._log.close()


def launch_default(file: str, argument: str, robot: str) -> str:
    """The default of launch argument ``argument`` of ``launch/<file>`` for ``robot``, evaluated from the
    file's own text (a ``PythonExpression`` over ``robot``, or a constant)."""
    import ast

    tree = ast.parse((REPO / "launch" / file).read_text())
    declared = next(c for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "id", None)
                    == "DeclareLaunchArgument" and isinstance(c.args[0], ast.Constant) and c.args[0].value
                    == argument)
    default = next(k.value for k in declared.keywords if k.arg == "default_value")
    if isinstance(default, ast.Constant):
        return str(default.value)
    assert isinstance(default, ast.Call) and getattr(default.func, "id", None) == "PythonExpression"
    parts = [robot if isinstance(e, ast.Name) and e.id == "robot" else ast.literal_eval(e)
             for e in default.args[0].elts]  # type: ignore[attr-defined]
    return str(eval("".join(parts)))  # the launch file's own expression


def start_operator_arm(start_node: Any, namespace: str, arm: str, duration: float) -> Any:
    """A ``sim_robot`` in ``namespace/arm`` whose runs last ``duration`` s and the operator scores (several arms)."""
    return start_node("sim_robot", ns=f"{namespace}/{arm}", params={
        "policies": ["policy_a", "policy_b"], "success_rates": [0.5, 0.5], "auto_score": False,
        "duration": duration})
