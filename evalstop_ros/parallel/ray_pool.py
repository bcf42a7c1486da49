"""Rollout workers as Ray actors: submit, collect, cancel at once, restart a worker that died.

:class:`RayPool` starts Ray (``ray.init`` on this machine with ``num_cpus`` = the workers, or
joins a cluster at ``address``) with its logs kept out of the user's way (no dashboard, worker
output not forwarded, Ray's own logging at ERROR), and one :class:`~.rollout.RolloutWorker` actor
per worker (``max_restarts=-1``: Ray restarts an actor whose process died). A rollout in flight on
a worker that dies comes back as a failed :class:`~.rollout.RolloutOutcome` ("robot fault", the
worker named in its private text): the session journals it as a fault and runs the trial again
(the runner's fault rule, :class:`~evalstop_ros.session.driver.TrialDriver`) on a live idle worker
if there is one (:meth:`RayPool.up` tells without waiting whether a worker is back), else once the
restarted worker is up.
:meth:`RayPool.cancel` releases a rollout at once:
a rollout not started is cancelled, a running one's actor is killed (and restarted, its
simulations rebuilt on demand): a sync actor's running call cannot be interrupted otherwise.
"""

from __future__ import annotations

import logging
import os
import pathlib
import time
from collections.abc import Hashable
from typing import Any

from ..runner.errors import Category
from .errors import ParallelError
from .rollout import RolloutOutcome, RolloutRequest, RolloutWorker

__all__ = ["RayPool"]

#: Environment of the local workers: one BLAS/OpenMP thread each, MuJoCo rendering through EGL.
_WORKER_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MUJOCO_GL": "egl",
               "PYOPENGL_PLATFORM": "egl"}


#: Ray's setting of the workers' niceness above their raylet's (Ray's default 15), read when Ray starts here.
_NICENESS = "RAY_worker_niceness"


def _import_ray() -> Any:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage-stats banner
    try:
        import ray
    except ImportError as err:
        raise ParallelError("sim-eval needs Ray: pip install 'evalstop[ray]' (ray>=2.9)") from err
    return ray


class RayPool:
    """``workers`` rollout actors on Ray (module docstring); a context manager.

    :param workers: Number of actors (each reserves one CPU).
    :param address: A Ray cluster's address (``ray://HOST:10001`` or ``HOST:6379``); None: start Ray
        on this machine with ``num_cpus=workers``.
    """

    def __init__(self, workers: int, *, address: str | None = None) -> None:
        if workers < 1:
            raise ParallelError(f"`workers` must be at least 1; found {workers}")
        self.ray = _import_ray()
        self._started = False
        if not self.ray.is_initialized():
            env = dict(_WORKER_ENV)
            if address is None:  # local workers import this evalstop (a source checkout too)
                source = str(pathlib.Path(__file__).resolve().parents[2])
                env["PYTHONPATH"] = os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH", "")) if p)
                # Ray starts workers 15 nice levels below their raylet: on a shared machine the rollouts,
                # all of the work, then ran at the lowest priority (docs/sim_eval.md, the benchmark)
                os.environ.setdefault(_NICENESS, "0")
            try:
                self.ray.init(address=address or "local", num_cpus=None if address else workers,
                              include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                              runtime_env={"env_vars": env})
            except Exception as err:  # ConnectionError, RuntimeError, ValueError: Ray cannot start or join
                raise ParallelError(f"cannot start Ray{f' at {address}' if address else ''}: {err}") from err
            self._started = True
        actor = self.ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)(RolloutWorker)
        self.actors: list[Any] = [actor.remote() for _ in range(workers)]
        self._busy: dict[int, tuple[Hashable, Any, float]] = {}  # actor index -> (key, object ref, submitted)
        self._failed: set[int] = set()  # actors whose last rollout died with them
        self._probes: dict[int, Any] = {}  # a failed actor -> the call that tells when Ray restarted it (:meth:`up`)
        #: Rollouts lost with a worker (each came back as a failed outcome), and rollouts cancelled.
        self.worker_deaths = 0
        self.cancelled = 0

    @property
    def workers(self) -> int:
        return len(self.actors)

    @property
    def idle(self) -> int:
        """Workers without a rollout in flight."""
        return self.workers - len(self._busy)

    def in_flight(self) -> list[Hashable]:
        """The keys of the rollouts in flight, oldest first."""
        return [key for key, _, _ in sorted(self._busy.values(), key=lambda entry: entry[2])]

    def busy(self) -> list[int]:
        """The indices of the workers with a rollout in flight."""
        return sorted(self._busy)

    def worker_pids(self, timeout: float = 300.0) -> list[int]:
        """The process id of every worker, waiting until each is up (a restarting one is asked again)."""
        return [self._pid(index, timeout) for index in range(self.workers)]

    def _pid(self, index: int, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while True:
            try:
                pid = int(self.ray.get(self.actors[index].pid.remote(), timeout=max(deadline - time.monotonic(), 0.1)))
                self._failed.discard(index)  # it answered: up
                self._probes.pop(index, None)
                return pid
            except self.ray.exceptions.ActorUnavailableError:  # restarting: not up yet (polled)
                if time.monotonic() > deadline:
                    raise ParallelError(f"worker {index} did not come back within {timeout:g} s") from None
                time.sleep(0.2)

    def up(self, index: int) -> bool:
        """Worker ``index`` can take a rollout now; a worker that died (or was killed) is asked without
        waiting, until Ray has restarted it."""
        if index not in self._failed:
            return True
        try:
            probe = self._probes.setdefault(index, self.actors[index].pid.remote())
            ready, _ = self.ray.wait([probe], timeout=0)
            if not ready:
                return False
            del self._probes[index]
            self.ray.get(probe)
        except self.ray.exceptions.RayError:  # still restarting: asked again next time
            self._probes.pop(index, None)
            return False
        self._failed.discard(index)
        return True

    def submit(self, key: Hashable, request: RolloutRequest, *, worker: int | None = None) -> int:
        """Run ``request`` on worker ``worker``, or on an idle one (one that did not just fail, if any); its index."""
        idle = [i for i in range(self.workers) if i not in self._busy]
        if worker is not None:
            if worker not in idle:
                raise ParallelError(f"worker {worker} is not idle (or does not exist)")
            idle = [worker]
        if not idle:
            raise ParallelError("no idle worker (collect a result or cancel a rollout first)")
        index = next((i for i in idle if i not in self._failed), idle[0])
        if index in self._failed:  # killed or died: restarted by Ray; a call before it is up would fail
            self._pid(index, 300.0)
        self._busy[index] = (key, self.actors[index].run.remote(request), time.monotonic())
        return index

    def wait(self, timeout: float | None = None) -> list[tuple[Hashable, RolloutOutcome]]:
        """The rollouts that finished within ``timeout`` s (at least one unless it ran out), oldest first."""
        if not self._busy:
            return []
        refs = {entry[1]: index for index, entry in self._busy.items()}
        ready, _ = self.ray.wait(list(refs), num_returns=1, timeout=timeout)
        if ready:  # with everything else that is ready now
            ready, _ = self.ray.wait(list(refs), num_returns=len(refs), timeout=0)
        done = []
        for ref in ready:
            index = refs[ref]
            key, _, submitted = self._busy.pop(index)
            done.append((submitted, key, self._outcome(index, ref, submitted)))
        return [(key, outcome) for _, key, outcome in sorted(done, key=lambda entry: entry[0])]

    def _outcome(self, index: int, ref: Any, submitted: float) -> RolloutOutcome:
        try:
            outcome: RolloutOutcome = self.ray.get(ref)
            return outcome
        except self.ray.exceptions.RayError as err:  # the worker died (killed, out of memory, its node lost)
            self.worker_deaths += 1
            self._failed.add(index)
            return RolloutOutcome(False, time.monotonic() - submitted, category=Category.ROBOT.value,
                                  detail="the simulation worker died", text=f"worker {index}: {type(err).__name__}")

    def cancel(self, key: Hashable) -> bool:
        """Release the rollout ``key`` at once (module docstring); whether it was in flight."""
        index = next((i for i, entry in self._busy.items() if entry[0] == key), None)
        if index is None:
            return False
        _, ref, _ = self._busy.pop(index)
        self.ray.kill(self.actors[index], no_restart=False)  # a running sync call cannot be interrupted otherwise
        self._failed.add(index)
        self.ray.cancel(ref)
        self.cancelled += 1
        return True

    def close(self) -> None:
        """Cancel what is in flight, end the workers, and stop Ray if this pool started it."""
        for key in self.in_flight():
            self.cancel(key)
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)
        self.actors = []
        if self._started:
            self.ray.shutdown()

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
