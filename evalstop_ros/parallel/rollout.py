"""One simulated rollout, as a worker runs it: the robosuite adapter, the policy client, the runner's episode.

:class:`RolloutWorker` is plain Python (Ray makes it an actor, :mod:`.ray_pool`): it keeps one
:class:`~evalstop_ros.runner.adapters.robosuite.RobosuiteArm` per robosuite environment,
placement spread and seed (built once; tasks that differ only in horizon share it) and runs each
:class:`RolloutRequest` through the runner's own loop
(:func:`~evalstop_ros.runner.episode.run_episode`: the command guard, the policy client's bounded
frames), exactly as the ``policy_runner`` node does on a robot. A failure comes back as a
:class:`RolloutOutcome` with the runner's category (what may be shown) and its full text (for the
private error log only: it may quote the policy server).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from ..runner.adapters.base import EpisodeInfo
from ..runner.client import PolicyClient, ServerAddress, ServerConfig
from ..runner.episode import EpisodeSettings, run_episode
from ..runner.errors import Category, RunnerError

__all__ = ["RolloutOutcome", "RolloutRequest", "RolloutWorker"]

_ENDING: list[type] = []


def _ending_arm() -> type:
    """The robosuite Panda whose rollout ends once the task's own success check holds (as an operator
    ends a robot's rollout at "task done", :func:`~evalstop_ros.runner.episode.run_episode`); robosuite
    and MuJoCo are imported here, in the workers only."""
    if not _ENDING:
        from ..runner.adapters.robosuite import RobosuiteArm

        class EndingArm(RobosuiteArm):
            def task_done(self) -> bool:
                score = self.score()
                return bool(score is not None and score.success)

        _ENDING.append(EndingArm)
    return _ENDING[0]


@dataclasses.dataclass(frozen=True)
class RolloutRequest:
    """What one rollout needs (never shown to anyone: it holds the policy's server).

    ``episode`` is ``(session_id, trial_id, task, initial_condition)``; ``env``, ``spread``,
    ``scene_seed``, ``max_steps`` and ``rate`` come from the task's ``simulation`` entry.
    """

    session_id: str
    trial_id: int
    attempt: int
    task: str
    initial_condition: str
    prompt: str
    address: ServerAddress
    env: str
    spread: float
    scene_seed: int
    max_steps: int
    rate: float
    infer_timeout: float = 60.0


@dataclasses.dataclass(frozen=True)
class RolloutOutcome:
    """A finished (or failed) rollout: the simulator's score, or the runner's failure category.

    ``text`` is the failure's full text (private error log only); ``worker`` the process id that ran it.
    Where the time went (s): ``cpu_s`` the worker process's CPU time (MuJoCo, rendering), ``policy_s``
    the policy queries (send to reply), ``setup_s`` what came before the first action (the
    environment built on a worker's first rollout of a task, the scene's reset) and after the last.
    """

    ok: bool
    duration_s: float
    success: bool = False
    progress: float = 0.0
    steps: int = 0
    category: str = ""
    detail: str = ""
    text: str = ""
    worker: int = 0
    cpu_s: float = 0.0
    policy_s: float = 0.0
    setup_s: float = 0.0


def _cameras(config: ServerConfig) -> list[str]:
    """The robosuite cameras a policy with ``config`` reads: only those are rendered (the unread wrist
    camera was 38 % of a Lift rollout's CPU)."""
    from ..runner.adapters.robosuite import CAMERAS

    wanted = {"wrist_image_left"} if config.needs_wrist_camera else set()
    wanted |= {f"exterior_image_{i}_left" for i in range(1, config.n_external_cameras + 1)}
    return [camera for camera, name in CAMERAS.items() if name in wanted]


class RolloutWorker:
    """Runs rollouts on simulated Pandas, one environment per robosuite setting (module docstring)."""

    def __init__(self) -> None:
        self._arms: dict[tuple[str, float, int, float], Any] = {}

    def pid(self) -> int:
        """This worker's process id (the tests kill it)."""
        return os.getpid()

    def run(self, request: RolloutRequest) -> RolloutOutcome:
        """Run ``request``; a failure is an outcome with ``ok=False``, never an exception."""
        start, cpu = time.monotonic(), time.process_time()
        try:
            arm = self._arm(request)
            settings = EpisodeSettings(prompt=request.prompt, rate=request.rate, max_steps=request.max_steps,
                                       timeout=request.max_steps / request.rate + 1.0)
            episode = EpisodeInfo(request.session_id, request.trial_id, request.task, request.initial_condition)
            with PolicyClient(request.address, infer_timeout=request.infer_timeout) as client:
                arm.cameras = _cameras(client.config)
                result = run_episode(client, arm, episode, settings,
                                     policy_session=f"{request.session_id}-{request.trial_id}")
        except RunnerError as err:
            return RolloutOutcome(False, time.monotonic() - start, category=err.category.value, detail=err.detail,
                                  text=str(err), worker=os.getpid())
        except Exception as err:  # the simulator failed: a robot fault, its text private
            return RolloutOutcome(False, time.monotonic() - start, category=Category.ROBOT.value,
                                  text=f"{type(err).__name__}: {err}", worker=os.getpid())
        if result.score is None:
            return RolloutOutcome(False, time.monotonic() - start, category=Category.ROBOT.value,
                                  text="the simulator gave no score", worker=os.getpid())
        duration = time.monotonic() - start
        return RolloutOutcome(True, duration, success=result.score.success, progress=float(result.score.progress),
                              steps=result.steps, worker=os.getpid(), cpu_s=time.process_time() - cpu,
                              policy_s=sum(result.latencies), setup_s=max(duration - result.duration, 0.0))

    def _arm(self, request: RolloutRequest) -> Any:
        # tasks that differ only in horizon or prompt share one environment (each build takes seconds
        # of a worker's CPU); the scene is still drawn per task (the episode's task id seeds it)
        key = (request.env, request.spread, request.scene_seed, request.rate)
        if key not in self._arms:
            self._arms[key] = _ending_arm()(task=request.env, seed=request.scene_seed, rate=request.rate,
                                            spread=request.spread)
        return self._arms[key]

    def close(self) -> None:
        """Close the simulations."""
        for arm in self._arms.values():
            arm.close()
        self._arms.clear()
