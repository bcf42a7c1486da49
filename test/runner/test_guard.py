"""The command guard alone (pure, fast): refusal, clamping, rate limits, limits from a URDF, the published tables."""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_ros.runner.adapters.droid import FRANKA_LIMITS
from evalstop_ros.runner.adapters.sim import SimArm
from evalstop_ros.runner.adapters.widowx import WIDOWX_LIMITS
from evalstop_ros.runner.errors import Category, RunnerError, operator_message, parse_message
from evalstop_ros.runner.guard import CommandGuard, CommandLimits, limits_from_urdf

PANDA = FRANKA_LIMITS["panda"]
HOME = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
T = 1.0 / 15.0


def _guard(mode: str = "refuse", limits: CommandLimits = PANDA) -> CommandGuard:
    guard = CommandGuard(limits, T, mode)
    guard.start(HOME if limits is PANDA else np.zeros(len(limits.joint_names)))
    return guard


def _refusal(guard: CommandGuard, chunk: np.ndarray, space: str = "joint_position") -> RunnerError:
    with pytest.raises(RunnerError) as err:
        guard.check_chunk(chunk, space)
    assert err.value.category is Category.GUARD
    return err.value


def test_a_chunk_with_one_out_of_range_position_is_refused_whole_naming_the_joint_and_the_limit() -> None:
    chunk = np.tile(np.append(HOME, 1.0), (5, 1))
    chunk[3, 3] = 1e6          # joint 4, fourth action: the chunk is refused, not just that action
    err = _refusal(_guard(), chunk)
    assert err.detail == "panda_joint4 above its position limit -0.0698 rad"
    assert "1e+06" not in err.detail and "1000000" not in err.detail, "the value the policy sent is not echoed"
    chunk[3, 3] = -4.0
    assert _refusal(_guard(), chunk).detail == "panda_joint4 below its position limit -3.072 rad"


@pytest.mark.parametrize("mode", ["refuse", "clamp"])
def test_non_finite_values_are_refused_in_both_modes(mode: str) -> None:
    chunk = np.tile(np.append(HOME, 0.0), (3, 1))
    chunk[1, 2] = np.nan
    assert _refusal(_guard(mode), chunk).detail == "non-finite value for panda_joint3"
    chunk[1, 2], chunk[2, 7] = 0.0, np.inf
    assert _refusal(_guard(mode), chunk).detail == "non-finite value for the gripper"


def test_clamp_mode_clamps_positions_and_the_gripper_into_the_limits() -> None:
    chunk = np.array([[5.0, -5.0, 0.0, 1.0, 0.0, 1.0, 0.0, 2.0]])
    clamped = _guard("clamp").check_chunk(chunk, "joint_position")
    assert clamped[0].tolist() == [2.8973, -1.7628, 0.0, -0.0698, 0.0, 1.0, 0.0, 1.0]
    assert chunk[0, 0] == 5.0, "the caller's chunk is not modified"


def test_the_gripper_range_is_checked() -> None:
    chunk = np.array([np.append(HOME, 1.5)])
    assert _refusal(_guard(), chunk).detail == "gripper outside its range [0, 1]"


def _run(guard: CommandGuard, targets: np.ndarray, space: str = "joint_position") -> np.ndarray:
    return np.array([guard.command(np.append(t, 0.0), space)[:-1] for t in targets])


def test_position_targets_are_rate_limited_in_velocity_and_acceleration_and_stay_in_range() -> None:
    rng = np.random.default_rng(3)
    lower, upper = np.array(PANDA.position_lower), np.array(PANDA.position_upper)
    guard = _guard()
    # random far targets inside the range, each held a few ticks, then switched: jumps a tick cannot make
    targets = np.repeat(rng.uniform(lower, upper, (40, 7)), rng.integers(1, 8, 40), axis=0)
    commands = np.vstack([HOME, _run(guard, targets)])
    velocity = np.diff(commands, axis=0) / T
    acceleration = np.diff(np.vstack([np.zeros(7), velocity]), axis=0) / T
    assert np.all(commands >= lower - 1e-12) and np.all(commands <= upper + 1e-12)
    assert np.all(np.abs(velocity) <= np.array(PANDA.velocity) * (1 + 1e-9))
    assert np.all(np.abs(acceleration) <= np.array(PANDA.acceleration) * (1 + 1e-6))
    assert guard.limited > 0


def test_a_held_target_is_reached_without_overshoot() -> None:
    target = HOME + np.array([1.0, 0.5, -1.0, 0.3, 1.0, 0.5, 1.0])
    commands = _run(_guard(), np.tile(target, (200, 1)))
    assert np.allclose(commands[-1], target, atol=1e-9)
    travelled = (commands - HOME) * np.sign(target - HOME)
    assert np.all(travelled <= np.abs(target - HOME) + 1e-9), "no joint passes its target"


def test_velocity_commands_are_limited_and_brake_before_the_position_limit() -> None:
    guard = _guard()
    guard.start(np.array([2.5, 0.0, 0.0, -1.0, 0.0, 1.0, 0.0]))
    # joint 1 asked to run at 1 unit (3 rad/s) towards its limit 2.8973 for 2 s
    commands = _run(guard, np.tile([1.0, 0, 0, 0, 0, 0, 0], (30, 1)), "joint_velocity")
    speed = commands[:, 0] * PANDA.velocity_unit
    assert speed.max() <= PANDA.velocity[0] + 1e-9
    position = 2.5 + np.cumsum(speed) * T
    assert position.max() <= PANDA.position_upper[0] + 1e-9 and speed[-1] == pytest.approx(0.0, abs=1e-9)


def test_end_effector_actions_stay_in_the_workspace_and_under_the_speed() -> None:
    guard = CommandGuard(WIDOWX_LIMITS, 0.2)
    guard.start(np.zeros(6), np.array([0.3, 0.0, 0.2, 0, 0, 0]))
    out_of_box = np.array([[0.0, 0.0, 0.2, 0, 0, 0, 1.0]])   # 0.2 + 0.1 m (speed-limited) > 0.25 m
    assert _refusal(guard, out_of_box, "cartesian_velocity").detail == \
        "end effector z above the workspace limit 0.25 m"
    clamped = CommandGuard(WIDOWX_LIMITS, 0.2, "clamp")
    clamped.start(np.zeros(6), np.array([0.3, 0.0, 0.2, 0, 0, 0]))
    assert clamped.check_chunk(out_of_box, "cartesian_velocity")[0, 2] == pytest.approx(0.05)
    fast = guard.command(np.array([0.5, 0.0, 0.0, 0.0, 0.0, 3.0, 1.0]), "cartesian_velocity")
    assert np.linalg.norm(fast[:3]) == pytest.approx(0.5 * 0.2) and fast[5] == pytest.approx(2.0 * 0.2)


def test_limits_from_a_urdf() -> None:
    urdf = """<robot name="arm">
      <joint name="j1" type="revolute"><limit lower="-1.5" upper="1.5" velocity="2.0" effort="10"/></joint>
      <joint name="j2" type="continuous"><limit velocity="3.0" effort="10"/></joint>
      <joint name="j3" type="fixed"/>
    </robot>"""
    limits = limits_from_urdf(urdf, ["j2", "j1"])
    assert limits.position_lower == (-1e9, -1.5) and limits.velocity == (3.0, 2.0)
    with pytest.raises(ValueError, match="no joint 'j9'"):
        limits_from_urdf(urdf, ["j9"])
    with pytest.raises(ValueError, match="'j3' has no <limit velocity"):
        limits_from_urdf(urdf, ["j3"])
    with pytest.raises(ValueError, match="not valid XML"):
        limits_from_urdf("<robot", ["j1"])


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"velocity": (1.0, 0.0)}, "not a finite positive"),
    ({"position_lower": (1.0, 1.0)}, "position_lower above position_upper"),
    ({"velocity": (1.0,)}, "1 values for 2 joints"),
    ({"cartesian_unit": "furlongs"}, "cartesian_unit"),
])
def test_bad_limits_are_refused(kwargs: dict[str, object], match: str) -> None:
    base: dict[str, object] = {"joint_names": ("a", "b"), "position_lower": (-1.0, -1.0),
                               "position_upper": (0.0, 0.0), "velocity": (1.0, 1.0)}
    with pytest.raises(ValueError, match=match):
        CommandLimits(**(base | kwargs))  # type: ignore[arg-type]


def test_every_adapter_declares_limits() -> None:
    # the published tables (Franka FCI "Robot and interface specifications", Trossen wx250s specifications)
    assert PANDA.position_upper is not None and PANDA.position_upper[3] == -0.0698 and PANDA.velocity[0] == 2.175
    assert FRANKA_LIMITS["fr3"].position_lower is not None and FRANKA_LIMITS["fr3"].position_lower[5] == 0.5445
    assert WIDOWX_LIMITS.position_lower is not None and WIDOWX_LIMITS.position_lower[1] == pytest.approx(-1.885, abs=1e-3)
    sim = SimArm()
    assert sim.limits.velocity == (1.0,) * 7 and sim.control_period == pytest.approx(T)


def test_operator_messages_have_one_format() -> None:
    message = operator_message(Category.GUARD, "00ff00ff", "panda_joint4 above its position limit -0.0698 rad")
    assert parse_message(message + "; recorded in /x") == (
        "refused by the command guard", "00ff00ff", "panda_joint4 above its position limit -0.0698 rad")
    assert parse_message("policy server error: pi0_fast_droid") is None
