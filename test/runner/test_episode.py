"""Rollouts over the real protocol (the project's own server on loopback) with the ``sim`` arm.

Success depends on the actions: the "good" scripted policy succeeds more often than the "bad"
one on the same scenes. Every failure stops the arm and raises a RunnerError of a fixed category
(what the operator sees); its full text (for the runner's private log) may quote the server.
"""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

import numpy as np
import pytest
from runner_support import free_port

from evalstop_ros.runner.adapters.base import EpisodeInfo
from evalstop_ros.runner.adapters.sim import SimArm
from evalstop_ros.runner.client import PolicyClient, ServerAddress
from evalstop_ros.runner.episode import EpisodeControl, EpisodeSettings, run_episode
from evalstop_ros.runner.errors import Category, RunnerError
from evalstop_ros.runner.server import PolicyServer
from evalstop_ros.runner.stream import CommandStream, Sent, StreamSettings

FAST = EpisodeSettings("put the block on the target", rate=500.0, max_steps=30)


def _rollouts(kind: str, trials: int) -> list[tuple[bool, float]]:
    arm = SimArm(seed=11, end_on_success=False)  # every rollout runs its 30 steps
    out = []
    with PolicyServer(kind) as server:
        for trial in range(trials):
            with PolicyClient(ServerAddress("127.0.0.1", server.port)) as client:
                result = run_episode(client, arm, EpisodeInfo("s", trial, "t", "c"), FAST)
            assert result.steps == 30 and result.ended_by == "max_steps" and result.score is not None
            out.append((result.score.success, result.score.progress))
    return out


def test_the_good_policy_succeeds_more_often_than_the_bad_one() -> None:
    good, bad = _rollouts("good", 20), _rollouts("bad", 20)
    good_rate, bad_rate = np.mean([s for s, _ in good]), np.mean([s for s, _ in bad])
    assert good_rate >= 0.7 and bad_rate <= 0.3, (good_rate, bad_rate)
    assert np.mean([p for _, p in good]) > np.mean([p for _, p in bad])


def test_a_rollout_is_reproducible_for_the_same_trial() -> None:
    assert _rollouts("good", 3) == _rollouts("good", 3)


def test_gripper_threshold_and_velocity_clipping_reach_the_arm() -> None:
    class Recording(SimArm):
        actions: ClassVar[list[np.ndarray]] = []

        def act(self, action: np.ndarray, action_space: str, duration: float | None = None) -> None:
            self.actions.append(action.copy())
            super().act(action, action_space, duration)

    arm = Recording(seed=2, end_on_success=False)
    with PolicyServer("good", chunk=3) as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client:
        result = run_episode(client, arm, EpisodeInfo("s", 1, "t", "c"), FAST)
    actions = np.array(arm.actions)
    assert set(np.unique(actions[:, 7])) <= {0.0, 1.0} and 1.0 in actions[:, 7]   # raw 0.3 / 0.7
    assert np.abs(actions[:, :7]).max() <= 1.0
    assert len(result.latencies) == 10, "a chunk of 3 actions is queried every 3 steps"


def test_the_loop_keeps_its_rate() -> None:
    with PolicyServer("good") as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client:
        result = run_episode(client, SimArm(), EpisodeInfo("s", 1, "t", "c"),
                             EpisodeSettings("p", rate=50.0, max_steps=10))
    starts = np.array(result.step_starts)
    # absolute schedule: no drift, except for the ticks missed while a chunk was awaited (dropped, not made up)
    assert 9 / 50.0 - 0.005 <= starts[-1] <= (9 + result.missed_ticks) / 50.0 + 0.05
    assert np.diff(starts).min() >= 0.5 / 50.0


def test_operator_ends_the_episode_early() -> None:
    control = EpisodeControl()
    with PolicyServer("good") as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client:
        threading.Timer(0.2, control.finish).start()
        result = run_episode(client, SimArm(end_on_success=False), EpisodeInfo("s", 1, "t", "c"),
                             EpisodeSettings("p", rate=50.0, max_steps=1000), control=control)
    assert result.ended_by == "operator" and 3 <= result.steps < 100


def test_the_sim_arm_ends_a_rollout_when_the_task_is_done() -> None:
    """Issue 21: a successful rollout ends at the step the task is done (``task_done``), as a DROID operator
    ends the episode, and scores the success; a failing one runs to ``max_steps``; with
    ``end_on_success=False`` every rollout runs to ``max_steps`` with the same outcome."""
    settings = EpisodeSettings("p", rate=500.0, max_steps=200)
    with PolicyServer("good") as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client:
        ended = [run_episode(client, SimArm(seed=11), EpisodeInfo("s", t, "t", "c"), settings) for t in range(6)]
        full = [run_episode(client, SimArm(seed=11, end_on_success=False), EpisodeInfo("s", t, "t", "c"), settings)
                for t in range(6)]
    assert any(r.ended_by == "task_done" for r in ended)
    for short, long in zip(ended, full):
        assert short.score is not None and long.score is not None and long.ended_by == "max_steps"
        if short.ended_by == "task_done":
            assert short.score.success and short.steps < 200
        else:
            assert short.ended_by == "max_steps" and not short.score.success and short.steps == 200
        assert long.steps == 200


def test_api_key_is_sent_and_checked() -> None:
    with PolicyServer("good", api_key="s3cret") as server:
        with PolicyClient(ServerAddress("127.0.0.1", server.port, "s3cret")) as client:
            assert client.config.action_space == "joint_velocity"
        with pytest.raises(RunnerError) as err:
            PolicyClient(ServerAddress("127.0.0.1", server.port, "wrong"))
        assert "s3cret" not in str(err.value) and "wrong" not in str(err.value), "API keys are never written anywhere"
    assert err.value.category is Category.UNREACHABLE


def _fails(server_kind: str, match: str, category: Category, *, settings: EpisodeSettings = FAST,
           infer_timeout: float = 5.0, **server_options: object) -> SimArm:
    arm = SimArm()
    with PolicyServer(server_kind, **server_options) as server:  # type: ignore[arg-type]
        with pytest.raises(RunnerError, match=match) as err, \
                PolicyClient(ServerAddress("127.0.0.1", server.port), infer_timeout=infer_timeout) as client:
            run_episode(client, arm, EpisodeInfo("s", 1, "t", "c"), settings)
    assert err.value.category is category and err.value.detail == "", "the operator sees the category only"
    assert arm.stopped, "the arm must hold position after a failure"
    return arm


def test_failure_error_frame() -> None:
    _fails("error", r"(?s)policy server error frame: Traceback .*RuntimeError: scripted policy failure", Category.SERVER)


def test_failure_wrong_shape() -> None:
    _fails("wrong_shape", r"actions of shape \(4, 7\); expected \(N, 8\)", Category.PROTOCOL)


def test_failure_slow_server() -> None:
    start = time.monotonic()
    _fails("slow", r"too slow: no action chunk within 0.3 s", Category.TOO_SLOW, infer_timeout=0.3, delay=3.0)
    assert time.monotonic() - start < 5.0


def test_failure_disconnect_mid_episode() -> None:
    _fails("good", r"closed the connection", Category.SERVER, disconnect_after=3)


def test_failure_unreachable_server() -> None:
    port = free_port()
    with pytest.raises(RunnerError, match=rf"policy server ws://127.0.0.1:{port} unreachable") as err:
        PolicyClient(ServerAddress("127.0.0.1", port), connect_timeout=1.0)
    assert err.value.category is Category.UNREACHABLE


def test_emergency_abort_stops_the_arm_before_any_further_action() -> None:
    control = EpisodeControl()
    arm = _Commands()  # still running at the abort
    settings = EpisodeSettings("p", rate=50.0, max_steps=1000)
    stream = arm.stream(settings)
    with PolicyServer("good") as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client:
        threading.Timer(0.2, lambda: control.abort("emergency stop", stream)).start()
        with pytest.raises(RunnerError, match="emergency stop"):
            run_episode(client, arm, EpisodeInfo("s", 1, "t", "c"), settings, control=control, stream=stream)
    assert arm.stopped and arm.log[-2][1] == arm.log[-1][1] == "hold", "held at the abort, and again as it fails"


def test_an_episode_is_recorded_with_a_video_per_camera(tmp_path: Any) -> None:
    import imageio_ffmpeg

    from evalstop_ros.runner.recorder import EpisodeRecorder

    folder = tmp_path / "trial_0001_attempt_1"
    with PolicyServer("good", chunk=5) as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client:
        result = run_episode(client, SimArm(resolution=(48, 64)), EpisodeInfo("s", 1, "t", "c"), FAST,
                             recorder=EpisodeRecorder(folder, fps=15.0))
    with np.load(folder / "episode.npz") as npz:
        data = dict(npz)
    assert data["actions"].shape == (30, 8) and data["step_time"].shape == (30,)
    assert data["joint_position"].shape == (6, 7) and data["latency"].shape == (6,)
    assert np.all(np.diff(data["step_time"]) > 0)
    assert set(np.unique(data["actions"][:, 7])) <= {0.0, 1.0}
    for camera in ("exterior_image_1_left", "wrist_image_left"):  # a frame per control step at 15 Hz: real time
        frames, seconds = imageio_ffmpeg.count_frames_and_secs(str(folder / f"{camera}.mp4"))
        assert frames == 30 and seconds == pytest.approx(30 / 15.0, abs=0.1)
    assert result.steps == 30


def test_a_failed_episode_is_recorded_too(tmp_path: Any) -> None:
    from evalstop_ros.runner.recorder import EpisodeRecorder

    with PolicyServer("wrong_shape") as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client, \
            pytest.raises(RunnerError):
        run_episode(client, SimArm(), EpisodeInfo("s", 1, "t", "c"), FAST,
                    recorder=EpisodeRecorder(tmp_path / "failed", fps=15.0))
    with np.load(tmp_path / "failed" / "episode.npz") as npz:
        data = dict(npz)
    assert data["actions"].shape == (8, 8), "two chunks of 4 ran before the bad reply"


# -- the command guard, the schedule and bounded frames (issue 19) -------------------------------

class _Commands(SimArm):
    """The sim arm with its command stream noting every command and hold it sends (with the monotonic time)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**{"end_on_success": False, **options})  # every rollout runs its max_steps
        self.log: list[tuple[float, str, np.ndarray | None]] = []

    def stream(self, settings: EpisodeSettings) -> CommandStream:
        def note(sent: Sent) -> None:
            held = sent.kind in ("hold", "stop")
            self.log.append((sent.time, "hold" if held else sent.action_space, None if held else sent.command))

        return CommandStream(self, StreamSettings(period=1.0 / settings.rate, guard_mode=settings.guard_mode),
                             listener=note)


def _spacing(arm: _Commands) -> np.ndarray:
    return np.diff([t for t, _, _ in arm.log])


@pytest.mark.parametrize(("kind", "detail"), [
    ("out_of_limits", "joint4 above its position limit 1.5 rad"),
    ("nan", "non-finite value for joint3"),
])
def test_a_chunk_outside_the_limits_never_reaches_the_robot(kind: str, detail: str) -> None:
    arm = _Commands()
    with PolicyServer(kind) as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client, \
            pytest.raises(RunnerError) as err:
        run_episode(client, arm, EpisodeInfo("s", 1, "t", "c"), FAST, stream=arm.stream(FAST))
    assert err.value.category is Category.GUARD and err.value.detail == detail
    commands = np.array([a for _, space, a in arm.log if a is not None])
    assert len(commands) == 8, "the two good chunks ran, nothing of the third"
    assert np.all(np.isfinite(commands)) and np.abs(commands[:, :7]).max() <= 1.5
    assert arm.log[-1][1] == "hold", "the robot holds after a refusal"


def test_jumps_are_rate_limited_to_the_velocity_limit() -> None:
    arm = _Commands()
    with PolicyServer("jump") as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client:
        result = run_episode(client, arm, EpisodeInfo("s", 1, "t", "c"), FAST, stream=arm.stream(FAST))
    assert result.steps == 30 and result.limited > 0
    targets = np.array([np.zeros(7)] + [a[:7] for _, _, a in arm.log if a is not None])
    step = np.abs(np.diff(targets, axis=0))
    assert step.max() <= arm.limits.velocity[0] * arm.control_period + 1e-9, "no tick moves further than allowed"
    assert step.max() == pytest.approx(arm.max_velocity * arm.control_period), "it moves as fast as allowed"


def test_a_stall_mid_episode_holds_the_robot_and_resumes_without_catching_up() -> None:
    arm, events = _Commands(), []
    settings = EpisodeSettings("p", rate=50.0, max_steps=24, watchdog_ticks=5)
    with PolicyServer("stall", delay=1.5) as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client:
        result = run_episode(client, arm, EpisodeInfo("s", 1, "t", "c"), settings, on_event=events.append,
                             stream=arm.stream(settings))
    # (a loaded machine may delay another chunk past 5 ticks: then the watchdog holds again, and says so)
    assert result.steps == 24 and result.holds == len(events) >= 1
    assert set(events) == {"watchdog: no valid action for 5 ticks (0.10 s), robot holding position"}
    gaps = _spacing(arm)
    assert gaps.min() >= 0.5 / 50.0, "no two commands closer than half a period"
    kinds = [space for _, space, _ in arm.log]
    hold = kinds.index("hold")
    assert hold == 8, "after the two chunks before the stall"
    after = [t for t, space, _ in arm.log[hold + 1:hold + 5]]
    assert np.all(np.diff(after) >= 0.5 / 50.0)
    assert result.missed_ticks >= 1.5 * 50 * 0.8, "the stalled ticks are missed, not replayed"
    assert sum(space != "hold" for space in kinds) == 24


def test_a_300_mb_frame_is_refused_before_it_is_read(tmp_path: Any) -> None:
    """openpi's own server (another process) replies with a 300 MB frame: this process's peak memory
    grows by less than the default 32 MiB frame limit (before issue 19: by 903 MB)."""
    import resource

    from runner_support import start_openpi_server, stop

    port = free_port()
    server = start_openpi_server("huge", port, tmp_path / "huge.log", "--fail-after", "1",
                                 "--frame-bytes", str(300 * 10**6))
    arm = SimArm()
    try:
        with PolicyClient(ServerAddress("127.0.0.1", port), infer_timeout=60.0) as client, \
                pytest.raises(RunnerError, match=r"action chunk frame larger than 33554432 bytes") as err:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # KiB
            run_episode(client, arm, EpisodeInfo("s", 1, "t", "c"), FAST)
    finally:
        stop(server)
    assert err.value.category is Category.PROTOCOL and not np.any(arm.joints), "no command reached the arm"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 32 * 2**10


def test_a_metadata_frame_above_its_limit_is_refused() -> None:
    with PolicyServer("good", metadata={"action_space": "joint_velocity", "pad": "x" * 100_000}) as server, \
            pytest.raises(RunnerError, match=r"metadata frame larger than 65536 bytes") as err:
        PolicyClient(ServerAddress("127.0.0.1", server.port))
    assert err.value.category is Category.PROTOCOL


def test_clamp_mode_clamps_instead_of_refusing_but_never_passes_a_nan() -> None:
    arm = _Commands()
    clamp = EpisodeSettings("p", rate=500.0, max_steps=30, guard_mode="clamp")
    with PolicyServer("out_of_limits") as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client:
        result = run_episode(client, arm, EpisodeInfo("s", 1, "t", "c"), clamp, stream=arm.stream(clamp))
    commands = np.array([a for _, _, a in arm.log if a is not None])
    assert result.steps == 30 and np.abs(commands[:, :7]).max() <= 1.5
    climb = np.diff(commands[8:, 3])   # from the third chunk on, joint 4 heads for its limit at full speed
    assert np.allclose(climb, arm.max_velocity * arm.control_period), "clamped to the limit, then rate-limited"
    with PolicyServer("nan") as server, PolicyClient(ServerAddress("127.0.0.1", server.port)) as client, \
            pytest.raises(RunnerError, match="non-finite"):
        arm = _Commands()
        run_episode(client, arm, EpisodeInfo("s", 1, "t", "c"), clamp, stream=arm.stream(clamp))
