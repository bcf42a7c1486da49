"""The scripted grasping policies of the robosuite Panda (numpy only: no simulator needed).

Their perception (the red cube's centroid ray through the exterior camera's calibration onto the
table), their state machine (hover, descend, close, lift) and the grasp-height error each rollout
draws from its id; that they grasp real cubes in MuJoCo is tested in test_robosuite_adapter.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_ros.runner.scripted_physics import (
    CAMERA_POSITION,
    CAMERA_ROTATION,
    HEIGHT_ERROR,
    HESITATION,
    METADATA,
    GraspPolicy,
    height_error,
    hesitation,
    locate_cube,
)


def _image(row: int, col: int, size: int = 96, half: int = 2) -> np.ndarray:
    image = np.full((size, size, 3), 230, np.uint8)  # the white table
    image[row - half:row + half, col - half:col + half] = (185, 60, 70)  # robosuite's red cube
    return image


def test_the_image_centre_is_the_optical_axis_on_the_table() -> None:
    axis = -CAMERA_ROTATION[:, 2]  # the camera looks along its -z
    seen_z = 0.83
    expected = CAMERA_POSITION + (seen_z - CAMERA_POSITION[2]) / axis[2] * axis
    found = locate_cube(_image(48, 48))
    assert found is not None and np.allclose(found[:2], expected[:2], atol=0.005)
    right = locate_cube(_image(48, 72))
    assert right is not None and right[1] > found[1] + 0.1, "image right is the robot's +y (the camera faces it)"
    near = locate_cube(_image(80, 48))
    assert near is not None and near[0] > found[0] + 0.1, "lower rows are nearer the camera (+x)"
    assert locate_cube(np.full((96, 96, 3), 230, np.uint8)) is None


def _obs(image: np.ndarray, position: list[float], session: str = "s-1") -> dict[str, object]:
    return {"observation/exterior_image_1_left": image, "observation/cartesian_position": np.array([*position, 0, 0, 0]),
            "session_id": session}


def test_grasp_hovers_descends_closes_then_lifts() -> None:
    policy = GraspPolicy("grasp")
    image = _image(48, 48)
    cube = locate_cube(image)
    assert cube is not None
    far = policy.infer(_obs(image, [cube[0] - 0.2, cube[1], 1.0]))["actions"]
    assert far.shape == (4, 7) and far.dtype == np.float32 and METADATA["action_space"] == "cartesian_velocity"
    assert far[0, 0] > 0 and np.all(far[:, 6] < 0.5), "moves toward the cube with the gripper open"
    above = policy.infer(_obs(image, [cube[0], cube[1], cube[2] + 0.06]))["actions"]
    assert above[0, 2] < 0 and np.all(above[:, 6] < 0.5), "descends onto it, open"
    at = policy.infer(_obs(image, [cube[0], cube[1], cube[2] + 0.005]))["actions"]
    assert np.all(at[:, 6] > 0.5) and np.abs(at[:, :3]).max() < 0.05, "closes where it is"
    for _ in range(3):
        lift = policy.infer(_obs(image, [cube[0], cube[1], cube[2] + 0.005]))["actions"]
    assert lift[-1, 2] > 0 and np.all(lift[:, 6] > 0.5), "then lifts, closed"
    fresh = policy.infer(_obs(image, [cube[0], cube[1], cube[2] + 0.005], session="s-2"))["actions"]
    assert np.all(fresh[:, 6] > 0.5) and fresh[0, 2] == pytest.approx(0.0, abs=1e-6), "a new rollout starts over"


def test_high_closes_3_cm_higher_than_exact() -> None:
    image = _image(48, 48, half=4)
    seen = {kind: locate_cube(image, stride=4 if kind == "high" else 1, threshold=1.3 if kind == "high" else 2.0)
            for kind in ("exact", "high")}
    assert seen["exact"] is not None and seen["high"] is not None
    closes = {}
    for kind, cube in seen.items():
        height = [cube[0], cube[1], cube[2] + 0.035]  # 3.5 cm above the cube's centre
        closes[kind] = bool(np.all(GraspPolicy(kind).infer(_obs(image, height))["actions"][:, 6] > 0.5))
    assert closes == {"exact": False, "high": True}, "exact descends further; high closes on the cube's top"
    with pytest.raises(ValueError, match="unknown physics policy"):
        GraspPolicy("clever")


def test_the_grasp_height_error_is_drawn_per_rollout_from_its_id_alone() -> None:
    rollouts = [f"session-{trial}" for trial in range(400)]
    errors = {kind: np.array([height_error(kind, r) for r in rollouts]) for kind in ("grasp", "sloppy", "exact", "high")}
    assert [height_error("grasp", r) for r in rollouts[:20]] == list(errors["grasp"][:20]), "the same id, the same error"
    assert len(set(errors["grasp"])) == 400 and np.all(errors["grasp"] >= 0), "another rollout, another error"
    for kind in ("grasp", "sloppy"):  # half-normal: mean spread * sqrt(2 / pi)
        bias, spread = HEIGHT_ERROR[kind]
        assert errors[kind].mean() == pytest.approx(bias + spread * np.sqrt(2 / np.pi), rel=0.15)
    assert np.median(errors["sloppy"]) > 2 * np.median(errors["grasp"])
    assert np.all(errors["exact"] == 0.0) and np.all(errors["high"] == HEIGHT_ERROR["high"][0])


def test_the_policy_closes_at_the_height_its_rollout_drew() -> None:
    image = _image(48, 48, half=4)
    cube = locate_cube(image, stride=4, threshold=1.3)  # as sloppy sees it
    assert cube is not None
    ids = [f"s-{trial}" for trial in range(200)]
    small, large = min(ids, key=lambda r: height_error("sloppy", r)), max(ids, key=lambda r: height_error("sloppy", r))
    assert height_error("sloppy", large) > 0.015 and height_error("sloppy", small) < 0.001
    above = [cube[0], cube[1], cube[2] + 0.005 + 0.012]  # 1.2 cm above where an exact grasp closes
    policy = GraspPolicy("sloppy")  # one server's policy, two rollouts: each with its own error
    for rollout, closes in ((large, True), (small, False), (large, True)):
        actions = policy.infer(_obs(image, above, session=rollout))["actions"]
        assert policy.error == height_error("sloppy", rollout)
        assert bool(np.all(actions[:, 6] > 0.5)) is closes, (rollout, policy.error)
    fixed = GraspPolicy("sloppy", error=0.0)
    first = fixed.infer(_obs(image, above, session=large))["actions"][0]
    assert first[6] < 0.5 and first[2] < 0, "a fixed error wins over the drawn one: it descends, open"


def test_steady_and_shaky_hesitate_for_a_time_drawn_per_rollout_from_its_id_alone() -> None:
    rollouts = [f"session-{trial}" for trial in range(400)]
    waits = {kind: np.array([hesitation(kind, r) for r in rollouts]) for kind in ("steady", "shaky", "grasp", "exact")}
    assert [hesitation("steady", r) for r in rollouts[:20]] == list(waits["steady"][:20]), "the same id, the same wait"
    for kind in ("steady", "shaky"):  # half-normal: mean spread * sqrt(2 / pi)
        assert waits[kind].mean() == pytest.approx(HESITATION[kind] * np.sqrt(2 / np.pi), rel=0.15)
        errors = np.array([height_error(kind, r) for r in rollouts])
        assert abs(np.corrcoef(errors, waits[kind])[0, 1]) < 0.15, "the wait is drawn apart from the grasp error"
    assert not np.array_equal(waits["steady"], waits["shaky"]), "each kind draws its own"
    assert np.all(waits["grasp"] == 0.0) and np.all(waits["exact"] == 0.0), "the older kinds never hesitate"
    assert HEIGHT_ERROR["steady"][1] < HEIGHT_ERROR["shaky"][1], "steady grasps nearer the cube's centre"


def test_a_hesitating_policy_holds_still_and_open_then_grasps_as_grasp_does() -> None:
    image = _image(48, 48, half=4)
    cube = locate_cube(image)
    assert cube is not None
    rollout = next(f"s-{trial}" for trial in range(200) if 0.6 < hesitation("steady", f"s-{trial}") < 1.2)
    policy = GraspPolicy("steady")
    high = [cube[0] - 0.1, cube[1], cube[2] + 0.2]  # away from the cube: grasp would move at once
    chunks = []
    while len(chunks) * policy.chunk < policy.hold_actions + 2 * policy.chunk:
        chunks.append(policy.infer(_obs(image, high, session=rollout))["actions"])
    actions = np.concatenate(chunks)
    hold = round(hesitation("steady", rollout) * 15.0)
    assert policy.hold_actions == hold >= 9
    assert np.all(actions[:hold, :6] == 0.0) and np.all(actions[:hold, 6] < 0.5), "still and open while hesitating"
    assert np.all(np.linalg.norm(actions[hold:, :3], axis=1) > 0.01), "then it moves towards the cube"
    first = GraspPolicy("grasp", error=policy.error).infer(_obs(image, high, session=rollout))["actions"][0]
    assert np.allclose(actions[hold], first, atol=1e-6), "from where it stood, as the kind without a wait"
