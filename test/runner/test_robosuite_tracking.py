"""Every action space of the ``robosuite`` Panda tracks its command, measured on the simulator's state.

A command is held for a stretch of simulated time and the motion read from MuJoCo's own data
(``sim.data.qpos``, the end-effector site's ``site_xpos`` / ``site_xmat``), never from the adapter's
references. Tolerances (docs/policy_runner.md, "Real physics"): up to 0.5 m/s and 0.3 rad/s (end
effector) and 1 rad/s (joints) the motion over the hold is within 5 % of the command held, motion
across it within 5 % (7 % at 0.5 m/s, 10 % about the gripper's roll axis); at 1 m/s and 1 rad/s,
where the wrist (12 N m) saturates or lags while the arm speeds up, within 10 % (15 % turning)
along and 15 % across. The other joints of a joint-velocity command move less than 0.05 rad; a
joint position is reached within 0.01 rad.

The pure reference arithmetic (:mod:`evalstop_ros.runner.adapters.tracking`) is checked without
the simulator first.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from runner_support import require_robosuite
from scipy.spatial.transform import Rotation

from evalstop_ros.runner.adapters.base import EpisodeInfo
from evalstop_ros.runner.adapters.tracking import MovingOrientation, MovingReference, lead_time

RATE = 15.0


# -- the reference, without the simulator ----------------------------------------------------------
def test_a_held_velocity_moves_the_reference_by_v_dt_and_the_goal_leads_it() -> None:
    ref = MovingReference(np.zeros(3), lead=0.1, slack=0.02)
    velocity = np.array([0.3, 0.0, -0.1])
    for k in range(1, 16):
        goal = ref.advance(velocity, 1 / RATE, ref.position)   # an arm that follows exactly
        assert np.allclose(ref.position, velocity * k / RATE)
        assert np.allclose(goal, velocity * ((k - 1) / RATE + 0.5 / RATE + 0.1))


def test_a_blocked_arm_lets_the_reference_run_ahead_by_a_bounded_distance() -> None:
    # the arm stays at 0 while 0.3 m/s is commanded: the reference stops 0.005 + 0.06 * 0.3 m ahead
    ref = MovingReference(np.zeros(1), lead=lead_time(150.0), slack=0.005)
    for _ in range(60):
        ref.advance(np.array([0.3]), 1 / RATE, np.zeros(1))
    assert ref.position[0] == pytest.approx(0.005 + 0.06 * 0.3 + 0.3 / RATE)
    # the command turns around: the goal is behind the arm at once
    assert ref.advance(np.array([-0.3]), 1 / RATE, np.zeros(1))[0] < 0


def test_an_orientation_reference_turns_at_the_angular_velocity_and_stays_near_a_blocked_arm() -> None:
    ref = MovingOrientation(np.eye(3), lead=0.0, slack=0.05)
    for _ in range(15):
        ref.advance(np.array([0.0, 0.4, 0.0]), 1 / RATE, ref.rotation.as_matrix())
    assert np.allclose(ref.rotation.as_rotvec(), [0.0, 0.4, 0.0])
    for _ in range(30):   # the arm does not turn
        ref.advance(np.array([0.0, 0.4, 0.0]), 1 / RATE, np.eye(3))
    assert np.linalg.norm(ref.rotation.as_rotvec()) <= 0.05 + 0.06 * 0.4 + 0.4 / RATE + 1e-9


# -- the simulated Panda ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def arm() -> Iterator[object]:
    require_robosuite()
    from evalstop_ros.runner.adapters.robosuite import RobosuiteArm

    robot = RobosuiteArm(task="Lift", seed=0, rate=RATE)
    yield robot
    robot.close()


def _hand(arm: object) -> tuple[np.ndarray, Rotation]:
    """The end-effector site's world position and orientation, read from MuJoCo."""
    env = arm.env  # type: ignore[attr-defined]
    site = env.robots[0].eef_site_id["right"]
    return np.array(env.sim.data.site_xpos[site]), Rotation.from_matrix(np.array(env.sim.data.site_xmat[site]).reshape(3, 3))


def _joints(arm: object) -> np.ndarray:
    env = arm.env  # type: ignore[attr-defined]
    return np.array(env.sim.data.qpos[env.robots[0]._ref_joint_pos_indexes])


def _split(moved: np.ndarray, direction: np.ndarray) -> tuple[float, float]:
    """(motion along ``direction``, motion across it)."""
    along = float(moved @ direction)
    return along, float(np.linalg.norm(moved - along * direction))


# (speed m/s, direction in the base frame = the world's in Lift, hold s, tolerance along, across)
LINEAR = [
    (0.1, (0, 1, 0), 1.0, 0.05, 0.05),
    (0.3, (1, 0, 0), 1.0, 0.05, 0.05),
    (0.3, (0, 0, 1), 1.0, 0.05, 0.05),
    (0.5, (0, 1, 0), 0.8, 0.05, 0.07),   # 0.4 m: the move still ends inside the reach
    (1.0, (0, 1, 0), 0.5, 0.10, 0.15),   # the wrist saturates while the arm speeds up
]


@pytest.mark.parametrize(("speed", "direction", "hold", "along_tol", "across_tol"), LINEAR)
def test_cartesian_velocity_moves_the_hand_at_the_commanded_m_per_s(
        arm: object, speed: float, direction: tuple[int, int, int], hold: float, along_tol: float,
        across_tol: float) -> None:
    arm.begin(EpisodeInfo("s", 1, "t", "c", "cartesian_velocity", (32, 32)))  # type: ignore[attr-defined]
    unit = np.array(direction, dtype=np.float64)
    start, turned = _hand(arm)
    for _ in range(round(hold * RATE)):
        arm.act(np.concatenate([speed * unit, np.zeros(3), [0.0]]), "cartesian_velocity")  # type: ignore[attr-defined]
    end, now = _hand(arm)
    along, across = _split(end - start, unit)
    wanted = speed * round(hold * RATE) / RATE
    assert abs(along - wanted) <= along_tol * wanted and across <= across_tol * wanted, (along, across, wanted)
    if speed <= 0.3:   # and the hand keeps its orientation
        assert np.degrees((now * turned.inv()).magnitude()) < 3.0


# (rad/s, axis in the base frame, tolerance along, across): about x, the gripper's roll, couples
# most; at 1 rad/s the wrist takes about 0.07 s longer to come up to speed
ANGULAR = [(0.3, (1, 0, 0), 0.05, 0.10), (0.3, (0, 1, 0), 0.05, 0.05), (0.3, (0, 0, 1), 0.05, 0.05),
           (1.0, (0, 1, 0), 0.15, 0.05)]


@pytest.mark.parametrize(("speed", "axis", "along_tol", "across_tol"), ANGULAR)
def test_cartesian_velocity_turns_the_hand_at_the_commanded_rad_per_s(
        arm: object, speed: float, axis: tuple[int, int, int], along_tol: float, across_tol: float) -> None:
    arm.begin(EpisodeInfo("s", 1, "t", "c", "cartesian_velocity", (32, 32)))  # type: ignore[attr-defined]
    unit = np.array(axis, dtype=np.float64)
    start, before = _hand(arm)
    steps = round(0.6 * RATE) if speed > 0.5 else round(RATE)   # about 0.6 rad either way
    for _ in range(steps):
        arm.act(np.concatenate([np.zeros(3), speed * unit, [0.0]]), "cartesian_velocity")  # type: ignore[attr-defined]
    end, after = _hand(arm)
    along, across = _split((after * before.inv()).as_rotvec(), unit)
    wanted = speed * steps / RATE
    assert abs(along - wanted) <= along_tol * wanted and across <= across_tol * wanted, (along, across, wanted)
    assert np.linalg.norm(end - start) < 0.02, "the hand turns in place"


# (rad/s, joint index, hold s)
JOINT = [(0.3, 0, 1.0), (1.0, 0, 1.0), (-0.5, 1, 1.0), (0.5, 3, 1.0), (1.0, 6, 1.0)]


@pytest.mark.parametrize(("speed", "joint", "hold"), JOINT)
def test_joint_velocity_moves_the_joint_at_the_commanded_rad_per_s(
        arm: object, speed: float, joint: int, hold: float) -> None:
    arm.begin(EpisodeInfo("s", 1, "t", "c", "joint_velocity", (32, 32)))  # type: ignore[attr-defined]
    command = np.zeros(8)
    command[joint] = speed
    start = _joints(arm)
    for _ in range(round(hold * RATE)):
        arm.act(command, "joint_velocity")  # type: ignore[attr-defined]
    moved = _joints(arm) - start
    others = np.delete(moved, joint)
    assert abs(moved[joint] - speed * hold) <= 0.05 * abs(speed) * hold and np.abs(others).max() < 0.05, moved


def test_joint_positions_are_reached_and_a_moving_target_is_followed(arm: object) -> None:
    arm.begin(EpisodeInfo("s", 1, "t", "c", "joint_position", (32, 32)))  # type: ignore[attr-defined]
    start = _joints(arm)
    target = start + np.array([0.0, 0.0, 0.0, 0.2, 0.0, 0.0, 0.0])
    for _ in range(8):   # 0.53 s
        arm.act(np.append(target, 0.0), "joint_position")  # type: ignore[attr-defined]
    assert np.abs(_joints(arm) - target).max() < 0.01
    # a trajectory of positions at 0.5, -0.5 and 0.3 rad/s: each period's position is (nearly) reached
    arm.begin(EpisodeInfo("s", 1, "t", "c", "joint_position", (32, 32)))  # type: ignore[attr-defined]
    start, velocity = _joints(arm), np.array([0.5, 0.0, 0.0, 0.0, 0.0, -0.5, 0.3])
    for k in range(1, 16):
        command = start + velocity * k / RATE
        arm.act(np.append(command, 0.0), "joint_position")  # type: ignore[attr-defined]
        assert np.abs(_joints(arm) - command).max() < 0.02, k
    for _ in range(4):
        arm.act(np.append(command, 0.0), "joint_position")  # type: ignore[attr-defined]
    assert np.abs(_joints(arm) - command).max() < 0.01


def test_an_arm_pressed_on_the_table_lifts_as_soon_as_the_command_turns(arm: object) -> None:
    """Pushing down into the table for 2 s winds up no reference: lifting at 0.1 m/s moves the hand
    up within the next period, and it presses the table no harder after 2 s than after 1 s."""
    arm.begin(EpisodeInfo("s", 1, "t", "c", "cartesian_velocity", (32, 32)))  # type: ignore[attr-defined]
    down, up = np.array([0, 0, -0.3, 0, 0, 0, 0.0]), np.array([0, 0, 0.1, 0, 0, 0, 0.0])
    env = arm.env  # type: ignore[attr-defined]
    pressing = []
    for _ in range(2 * round(RATE)):
        arm.act(down, "cartesian_velocity")  # type: ignore[attr-defined]
        pressing.append(float(np.abs(env.sim.data.ctrl[:7]).sum()))
    low = _hand(arm)[0][2]
    assert low < 0.9, "the hand reached the table (top at 0.8 m)"
    assert pressing[-1] <= 1.1 * pressing[round(RATE)], pressing
    arm.act(up, "cartesian_velocity")  # type: ignore[attr-defined]
    assert _hand(arm)[0][2] > low + 0.001
