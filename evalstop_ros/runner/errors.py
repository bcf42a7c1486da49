"""The one exception type of the runner package."""

from __future__ import annotations

__all__ = ["RunnerError"]


class RunnerError(RuntimeError):
    """A rollout cannot go on: policy server unreachable, slow, disconnected, wrong reply, robot fault.

    The message never names the policy or its server (it is shown to the operator, who must stay
    blind to the policy's identity); the node prefixes the blinded trial.
    """
