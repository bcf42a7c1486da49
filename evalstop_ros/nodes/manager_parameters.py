"""The manager nodes' parameters: declared with their ranges and descriptions, checked at start-up and on every change.
"""

from __future__ import annotations

import math
from typing import Any

from ._common import declare

__all__ = ["SESSION_PARAMETERS", "ManagerParameters", "RunnerParameters", "check_parameter", "declare_manager_parameters",
           "declare_runner_parameters"]

#: Parameters fixed for the life of a session (a change is refused while one is active).
SESSION_PARAMETERS = ("alpha", "method", "n_max", "confirm_reset", "max_attempts", "config_file", "session_id",
                      "journal_dir", "runner_action", "runners")


def check_parameter(name: str, value: Any) -> str:
    """Why ``value`` is not valid for parameter ``name`` ("" if it is); applied at start-up and on set.

    >>> check_parameter("alpha", 1.0)
    "`alpha` must lie in (0, 1), or be 0 for the config's; found 1.0"
    >>> check_parameter("alpha", 0.0), check_parameter("max_attempts", 0)
    ('', '`max_attempts` must be >= 1; found 0')
    """
    if name == "alpha" and not (value == 0.0 or 0.0 < value < 1.0):
        return f"`alpha` must lie in (0, 1), or be 0 for the config's; found {value!r}"
    if name == "n_max" and value < 0:
        return f"`n_max` must be >= 1, or 0 for the config's; found {value!r}"
    if name == "max_attempts" and value < 1:
        return f"`max_attempts` must be >= 1; found {value!r}"
    if name in ("goal_response_timeout", "exit_linger") and not (math.isfinite(value) and value > 0):
        return f"`{name}` must be a number of seconds > 0; found {value!r}"
    return ""


class RunnerParameters:
    """The shared parameters' values as attributes of the node (kept current by its set-parameters callback)."""

    journal_dir: str
    runner_action: str
    exit_on_finish: bool
    exit_linger: float
    max_attempts: int
    goal_response_timeout: float
    goal_key_file: str
    allow_unsealed: bool


class ManagerParameters(RunnerParameters):
    """``evaluation_manager``'s parameters as attributes of the node."""

    config_file: str
    session_id: str
    auto_start: bool
    operator_keys_file: str
    allow_unsigned: bool
    journal_fsync: bool
    alpha: float
    method: str
    n_max: int
    confirm_reset: bool
    runners: list[str]


def _check(node: Any, names: tuple[str, ...]) -> None:
    for name in names:
        problem = check_parameter(name, getattr(node, name))
        if problem:
            raise ValueError(problem)


def declare_runner_parameters(node: Any) -> None:  # Any: a RunnerParameters node (mypy has no intersection type)
    """Declare the parameters of every manager node on ``node`` (a :class:`RunnerParameters` node), set
    their attributes, and check the values (:class:`ValueError` naming the first bad one)."""
    node.journal_dir = declare(
        node, "journal_dir", "", "Directory of the session journals (a station's: journal_dir/hub-<station_id>; empty: "
        "$ROS_HOME/evalstop or ~/.ros/evalstop).")
    node.runner_action = declare(
        node, "runner_action", "", "RunTrial action of the robot's runner (empty: the config's runner.action_name).")
    node.exit_on_finish = declare(
        node, "exit_on_finish", False, "Exit (status 0) once the session (a station's work) is finished or aborted.")
    node.exit_linger = declare(
        node, "exit_linger", 2.0,
        "With exit_on_finish: seconds to keep serving the final (latched) status before exiting, "
        "so that subscribers still being discovered receive it.", float_range=(0.001, 3600.0))
    node.max_attempts = declare(
        node, "max_attempts", 3,
        "Runner faults in a row on one trial before the session pauses, for a config that does not set "
        "runner.max_attempts (journaled with the session); also the sends of a goal without a response "
        "before that counts as a fault.", int_range=(1, 1000))
    node.goal_response_timeout = declare(
        node, "goal_response_timeout", 5.0,
        "Seconds to wait for the runner's answer to a goal (or for a finished goal's result) before "
        "sending it again: DDS can lose responses.", float_range=(0.05, 600.0))
    node.goal_key_file = declare(
        node, "goal_key_file", "",
        "The runner key file (one `NAME HEXKEY` line, `evalstop keys new runner`; the runner's goal_key_file "
        "holds the same key): what identifies the policy in a RunTrial goal is sealed for the runner "
        "(docs/deploying.md). Empty: goals carry the policy in clear.", read_only=True)
    node.allow_unsealed = declare(
        node, "allow_unsealed", True,
        "Start without goal_key_file (goals carry the policy in clear, readable by any node on the domain and "
        "in /dev/shm). eval.launch.py and station.launch.py set it false for the real robots (droid, widowx).",
        read_only=True)
    _check(node, ("max_attempts", "goal_response_timeout", "exit_linger"))


def declare_manager_parameters(node: Any) -> None:  # Any: a ManagerParameters node
    """Declare ``evaluation_manager``'s session parameters on ``node`` (a :class:`ManagerParameters` node
    whose :func:`declare_runner_parameters` are declared), set their attributes, and check the values."""
    node.config_file = declare(
        node, "config_file", "", "Session config (YAML) started at launch (auto_start) or by start_session.")
    node.session_id = declare(
        node, "session_id", "",
        "Session id; the journal is journal_dir/<session_id>.db. Reusing an id resumes that session. "
        "Empty: <config name>-<UTC time>.")
    node.auto_start = declare(
        node, "auto_start", True, "Start (or resume) the session from config_file at launch.")
    node.operator_keys_file = declare(
        node, "operator_keys_file", "",
        "Key file of the authorized operators (`OPERATOR HEXKEY` lines): scores, corrections and session "
        "control must be signed (docs/integrity.md). Empty: NOT authenticated.", read_only=True)
    node.allow_unsigned = declare(
        node, "allow_unsigned", True,
        "Start without operator_keys_file (unsigned scores and controls). eval.launch.py sets it false for the "
        "real robots (droid, widowx): the lab must make keys (`evalstop keys new`) or say allow_unsigned:=true.",
        read_only=True)
    node.journal_fsync = declare(
        node, "journal_fsync", True,
        "fsync every journal append (survives a power cut); false survives a killed process only.")
    # Pre-registered test settings: overrides of the config before a session starts, fixed after.
    node.alpha = declare(
        node, "alpha", 0.0, "Override of the config's session alpha, in (0, 1) (0: keep the config's).",
        float_range=(0.0, 1.0))
    node.method = declare(
        node, "method", "", "Override of every metric's sequential method, e.g. 'nscore' (empty: the config's).")
    node.n_max = declare(
        node, "n_max", 0, "Override of the config's trial budget per comparison (0: keep the config's).",
        int_range=(0, 1_000_000))
    node.confirm_reset = declare(
        node, "confirm_reset", False,
        "Ask the operator to confirm each scene reset before the robot starts, even if the config does not "
        "(sets the config's confirm_reset: part of the pre-registered design). False: the config's setting.")
    from rcl_interfaces.msg import ParameterDescriptor
    from rclpy.parameter import Parameter

    # a string array without a default (rclpy cannot type an empty list): unset means the config's
    node.runners = node.declare_parameter("runners", Parameter.Type.STRING_ARRAY, ParameterDescriptor(
        description="Override of the config's runner.runners: the RunTrial actions serving the session at once, "
                    "e.g. [arm_1/run_trial, arm_2/run_trial] (docs/parallel.md; eval.launch.py arms:=N sets it). "
                    "Unset: the config's.")).value or []
    _check(node, ("alpha", "n_max"))
