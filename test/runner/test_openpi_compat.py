"""Both directions of the protocol against openpi's own code (separate venv: numpy < 2).

* openpi-client's ``WebsocketClientPolicy`` talks to the project's server
  (:mod:`evalstop_ros.runner.server`);
* the project's client and episode loop talk to openpi-server's ``WebsocketPolicyServer``;
* frames packed by openpi's ``msgpack_numpy`` decode here, and ours decode there.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Iterator

import numpy as np
import pytest
from runner_support import free_port, openpi_python, start_openpi_server, stop

from evalstop_ros.runner import wire
from evalstop_ros.runner.adapters.base import EpisodeInfo
from evalstop_ros.runner.adapters.sim import SimArm
from evalstop_ros.runner.client import PolicyClient, ServerAddress
from evalstop_ros.runner.episode import EpisodeSettings, run_episode
from evalstop_ros.runner.errors import Category, RunnerError
from evalstop_ros.runner.scripted import METADATA
from evalstop_ros.runner.server import PolicyServer


def _openpi(script: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    out = subprocess.run([str(openpi_python()), "-c", textwrap.dedent(script), *args], input=stdin,
                         capture_output=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    return out


CLIENT = """
    import json, sys
    import numpy as np
    from openpi_client.websocket_client_policy import WebsocketClientPolicy
    port, key, kind = int(sys.argv[1]), sys.argv[2] or None, sys.argv[3]
    policy = WebsocketClientPolicy("127.0.0.1", port, api_key=key)
    obs = {"observation/exterior_image_1_left": np.full((32, 32, 3), 128, np.uint8),
           "observation/wrist_image_left": np.zeros((32, 32, 3), np.uint8),
           "observation/joint_position": np.zeros(7), "observation/cartesian_position": np.zeros(6),
           "observation/gripper_position": np.zeros(1), "prompt": "go"}
    try:
        replies = [policy.infer(obs) for _ in range(3)]
    except RuntimeError as err:
        print(json.dumps({"error": str(err)}))
        sys.exit(0)
    actions = replies[-1]["actions"]
    print(json.dumps({"metadata": policy.get_server_metadata(), "shape": list(actions.shape),
                      "dtype": actions.dtype.str, "timing": sorted(replies[-1]["server_timing"]),
                      "max": float(np.abs(actions[:, :7]).max())}))
"""


def test_openpi_client_against_the_project_server() -> None:
    with PolicyServer("good", api_key="k3y") as server:
        reply = json.loads(_openpi(CLIENT, str(server.port), "k3y", "good").stdout)
    assert reply["metadata"] == json.loads(json.dumps(METADATA))
    assert reply["shape"] == [4, 8] and reply["dtype"] == "<f4"
    assert reply["timing"] == ["infer_ms", "prev_total_ms"]
    # an image of 128 everywhere means goal 0 and the arm is at 0: the policy stands still
    assert reply["max"] == 0.0


def test_openpi_client_sees_the_project_server_error_frame() -> None:
    with PolicyServer("error", fail_after=2) as server:
        reply = json.loads(_openpi(CLIENT, str(server.port), "", "error").stdout)
    assert reply["error"].startswith("Error in inference server:\nTraceback")
    assert "RuntimeError: scripted policy failure" in reply["error"]


def test_frames_decode_in_both_directions() -> None:
    values = {"f4": np.arange(6, dtype=np.float32).reshape(2, 3), "u8": np.arange(5, dtype=np.uint8),
              "i8": np.array([[-1, 2]], dtype=">i8"), "s": np.float32(0.25), "text": "x"}
    theirs = _openpi("""
        import sys, numpy as np
        from openpi_client import msgpack_numpy
        sys.stdout.buffer.write(msgpack_numpy.packb({
            "f4": np.arange(6, dtype=np.float32).reshape(2, 3), "u8": np.arange(5, dtype=np.uint8),
            "i8": np.array([[-1, 2]], dtype=">i8"), "s": np.float32(0.25), "text": "x"}))
    """).stdout
    decoded = wire.unpack(theirs)
    for key in ("f4", "u8", "i8"):
        assert decoded[key].dtype == values[key].dtype and np.array_equal(decoded[key], values[key])
    assert decoded["s"] == 0.25 and type(decoded["s"]) is np.float32 and decoded["text"] == "x"
    assert wire.pack(values) == theirs, "byte-identical frames"
    back = _openpi("""
        import sys, numpy as np
        from openpi_client import msgpack_numpy
        d = msgpack_numpy.unpackb(sys.stdin.buffer.read())
        print({k: (v.dtype.str, v.shape, v.tolist()) if hasattr(v, "dtype") else v for k, v in d.items()})
    """, stdin=wire.pack(values)).stdout.decode()
    assert "'i8': ('>i8', (1, 2), [[-1, 2]])" in back and "'s': ('<f4', (), 0.25)" in back


@pytest.fixture(scope="module")
def openpi_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    ports = {"good": free_port(), "error": free_port()}
    logs = tmp_path_factory.mktemp("openpi")
    processes = [start_openpi_server(kind, port, logs / f"{kind}.log") for kind, port in ports.items()]
    yield ports
    for process in processes:
        stop(process)


def test_project_client_runs_episodes_against_openpi_server(openpi_servers: dict[str, int]) -> None:
    arm = SimArm(seed=5)
    wins = 0
    for trial in range(5):
        with PolicyClient(ServerAddress("127.0.0.1", openpi_servers["good"])) as client:
            assert client.metadata == METADATA | {"image_resolution": [32, 32]}
            result = run_episode(client, arm, EpisodeInfo("s", trial, "t", "c"),
                                 EpisodeSettings("p", rate=500.0, max_steps=30), policy_session=f"s-{trial}")
        assert result.reset_error == "" and result.score is not None
        wins += result.score.success
    assert wins >= 3


def test_project_client_reads_openpi_server_error_frame(openpi_servers: dict[str, int]) -> None:
    arm = SimArm()
    with pytest.raises(RunnerError, match=r"(?s)policy server error frame: .*RuntimeError: scripted policy failure") as err, \
            PolicyClient(ServerAddress("127.0.0.1", openpi_servers["error"])) as client:
        run_episode(client, arm, EpisodeInfo("s", 1, "t", "c"), EpisodeSettings("p", rate=500.0, max_steps=30))
    assert arm.stopped and err.value.category is Category.SERVER
