"""The surrogate model of seed 004 §IV-A: an MLP on (policy, task) embeddings with MC dropout (App. C).

Heads, training and why PyTorch: docs/active.md. PyTorch (the ``active`` extra) is imported where a
surrogate is built or used, not with the package: the shrinkage surrogate and the acquisition need
only numpy and scipy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import ActiveError
from .observations import average_log_likelihood, bin_index, check_observations

if TYPE_CHECKING:
    import torch

__all__ = ["OUTCOMES", "Surrogate", "bin_index"]

OUTCOMES = ("binary", "binned")
Outcome = Literal["binary", "binned"]


class Surrogate:
    """MLP surrogate over every (policy, task) pair (module docstring).

    Parameters
    ----------
    policy_embeddings, task_embeddings:
        ``(M, d_pi)`` and ``(N, d_T)`` arrays (:mod:`.embeddings`).
    outcome:
        ``"binary"`` or ``"binned"``.
    bins:
        Bins of the ``"binned"`` head (25, the paper's EIG bins).
    hidden, depth, dropout:
        Width and number of hidden layers, dropout rate (0.1 in App. B-B).
    lr, weight_decay, epochs:
        AdamW settings and full-batch epochs per :meth:`fit`.
    seed:
        Seed of the initial weights (each fit re-initialises from it).
    """

    def __init__(self, policy_embeddings: ArrayLike, task_embeddings: ArrayLike, *, outcome: str = "binary",
                 bins: int = 25, hidden: int = 128, depth: int = 2, dropout: float = 0.1, lr: float = 3e-3,
                 weight_decay: float = 1e-4, epochs: int = 100, seed: int = 0) -> None:
        import torch

        if outcome not in OUTCOMES:
            raise ActiveError(f"`outcome` should be one of {OUTCOMES}; found {outcome!r}")
        if not 0.0 <= dropout < 1.0:
            raise ActiveError(f"`dropout` must lie in [0, 1); found {dropout!r}")
        for name, value in (("bins", bins), ("hidden", hidden), ("depth", depth), ("epochs", epochs)):
            if value < 1:
                raise ActiveError(f"`{name}` must be a positive integer; found {value!r}")
        self.policies = torch.as_tensor(np.asarray(policy_embeddings, dtype=np.float32))
        self.tasks = torch.as_tensor(np.asarray(task_embeddings, dtype=np.float32))
        self.outcome: Outcome = outcome  # type: ignore[assignment]
        self.bins = bins if outcome == "binned" else 2
        self.lr, self.weight_decay, self.epochs, self.seed = lr, weight_decay, epochs, seed
        width = self.policies.shape[1] + self.tasks.shape[1]
        layers: list[torch.nn.Module] = []
        for _ in range(depth):
            layers += [torch.nn.Linear(width, hidden), torch.nn.ReLU(), torch.nn.Dropout(dropout)]
            width = hidden
        layers.append(torch.nn.Linear(width, 1 if outcome == "binary" else bins))
        self.network = torch.nn.Sequential(*layers)
        self._initial = {k: v.clone() for k, v in self._seeded_init().items()}

    @property
    def shape(self) -> tuple[int, int]:
        """``(M, N)``: policies x tasks."""
        return int(self.policies.shape[0]), int(self.tasks.shape[0])

    def _seeded_init(self) -> dict[str, torch.Tensor]:
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            for module in self.network:
                if isinstance(module, torch.nn.Linear):
                    module.reset_parameters()
        return self.network.state_dict()

    def _inputs(self, policy: NDArray[np.int64], task: NDArray[np.int64]) -> torch.Tensor:
        import torch

        return torch.cat([self.policies[policy], self.tasks[task]], dim=1)

    def _all_inputs(self) -> torch.Tensor:
        m, n = self.shape
        grid = np.indices((m, n)).reshape(2, -1)
        return self._inputs(grid[0], grid[1])

    def _loss(self, logits: torch.Tensor, y: NDArray[np.float64]) -> torch.Tensor:
        import torch

        if self.outcome == "binary":
            return torch.nn.functional.binary_cross_entropy_with_logits(
                logits[:, 0], torch.as_tensor(y, dtype=torch.float32))
        return torch.nn.functional.cross_entropy(logits, torch.as_tensor(bin_index(y, self.bins)))

    def fit(self, policy: ArrayLike, task: ArrayLike, outcomes: ArrayLike, *, warm_start: bool = False) -> float:
        """Train on the data for ``epochs`` epochs (Alg. 1 line 9); returns the final loss.

        ``warm_start=False`` (default) re-initialises from the seed first, so the result is a
        function of ``(seed, data)`` alone; ``True`` continues from the current weights, as the
        paper's continuous retraining does (faster per step, not replayable from one step's data).
        With no data the network keeps its initial weights.
        """
        import torch

        p, t, y = check_observations(policy, task, outcomes, shape=self.shape, outcome=self.outcome)
        if not warm_start:
            self.network.load_state_dict(self._initial)
        if not y.size:
            return float("nan")
        inputs = self._inputs(p, t)
        optimizer = torch.optim.AdamW(self.network.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        self.network.train()
        loss = torch.zeros(())
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed + 1)
            for _ in range(self.epochs):
                optimizer.zero_grad()
                loss = self._loss(self.network(inputs), y)
                loss.backward()  # type: ignore[no-untyped-call]
                optimizer.step()
        return float(loss.detach())

    def _probabilities(self, logits: torch.Tensor) -> NDArray[np.float64]:
        import torch

        if self.outcome == "binary":
            p = torch.sigmoid(logits[..., 0])
            return torch.stack([1 - p, p], dim=-1).double().numpy()
        return torch.softmax(logits, dim=-1).double().numpy()

    def predict(self, *, samples: int = 0, seed: int = 0) -> NDArray[np.float64]:
        """Outcome distributions of every pair, shape ``(S, M, N, B)``.

        ``samples=0``: one deterministic pass in eval mode (metrics, App. B); ``samples=S``:
        ``S`` MC-dropout passes (App. C) seeded by ``seed``.  ``B = 2`` (failure, success) for
        the binary head, else the bins.
        """
        import torch

        inputs = self._all_inputs()
        m, n = self.shape
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            if samples == 0:
                self.network.eval()
                logits = self.network(inputs)[None]
            else:
                self.network.train()
                logits = torch.stack([self.network(inputs) for _ in range(samples)])
        self.network.eval()
        return self._probabilities(logits).reshape(logits.shape[0], m, n, self.bins)

    def centres(self) -> NDArray[np.float64]:
        """The outcome each class stands for: ``(0, 1)``, or the bin centres."""
        if self.outcome == "binary":
            return np.array([0.0, 1.0])
        return (np.arange(self.bins) + 0.5) / self.bins

    def mean(self) -> NDArray[np.float64]:
        """Predicted mean outcome ``E_Q[X]`` of every pair, ``(M, N)`` (eval mode)."""
        return np.asarray(self.predict()[0] @ self.centres(), dtype=np.float64)

    def log_likelihood(self, policy: ArrayLike, task: ArrayLike, outcomes: ArrayLike) -> float:
        """Average log-likelihood (density for ``"binned"``: ``log(q_b K)``) of outcomes (§V, Fig. 2)."""
        p, t, y = check_observations(policy, task, outcomes, shape=self.shape, outcome=self.outcome)
        return average_log_likelihood(self.predict()[0][p, t], y, outcome=self.outcome, bins=self.bins)
