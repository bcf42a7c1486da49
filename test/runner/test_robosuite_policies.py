"""The scripted grasping policies of the robosuite Panda (numpy only: no simulator needed).

Their perception (the red cube's centroid ray through the exterior camera's calibration onto the
table) and their state machine (hover, descend, close, lift); that they grasp real cubes in MuJoCo
is tested in test_robosuite_adapter.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_ros.runner.scripted_physics import CAMERA_POSITION, CAMERA_ROTATION, METADATA, GraspPolicy, locate_cube


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


def test_sloppy_closes_3_cm_higher_than_grasp() -> None:
    image = _image(48, 48, half=4)
    seen = {kind: locate_cube(image, stride=4 if kind == "sloppy" else 1, threshold=1.3 if kind == "sloppy" else 2.0)
            for kind in ("grasp", "sloppy")}
    assert seen["grasp"] is not None and seen["sloppy"] is not None
    closes = {}
    for kind, cube in seen.items():
        height = [cube[0], cube[1], cube[2] + 0.035]  # 3.5 cm above the cube's centre
        closes[kind] = bool(np.all(GraspPolicy(kind).infer(_obs(image, height))["actions"][:, 6] > 0.5))
    assert closes == {"grasp": False, "sloppy": True}, "grasp descends further; sloppy closes on the cube's top"
    with pytest.raises(ValueError, match="unknown physics policy"):
        GraspPolicy("clever")
