"""Deterministic randomization of a session: trial order, conditions, blinded labels, tokens.

Every choice is a pure function of a secret, committed and revealed key and a named stream
(seed 003 App. IX-A, seed 000 App. C, seed 001's double blinding); docs/session.md.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import secrets
from collections.abc import Mapping, Sequence

import numpy as np

from .config import SessionConfig
from .config_sections import InitialCondition, Task

__all__ = ["KEY_BYTES", "LABELS", "STREAMS", "Condition", "Plan", "commit_key", "new_key", "verify_key"]

#: Named streams: the second entry of every generator seed.
STREAM_ORDER = 1
STREAM_TASK = 2
STREAM_CONDITION = 3
STREAM_LABELS = 4
STREAM_STEP = 5
STREAM_INTERIM = 6
STREAM_ADASTOP = 7
STREAM_AB = 8
STREAMS = {
    "order": STREAM_ORDER,
    "task": STREAM_TASK,
    "condition": STREAM_CONDITION,
    "labels": STREAM_LABELS,
    "step": STREAM_STEP,
    "interim": STREAM_INTERIM,
    "adastop": STREAM_ADASTOP,
    "ab": STREAM_AB,
}
#: Neutral labels, the first K used for K policies ("A"/"B" avoided: they read as baseline/candidate).
LABELS = tuple("XYZWVUTSRQPONMLKJIHGFEDCBA")
TOKEN_LENGTH = 12
#: Length of a session's secret randomization key.
KEY_BYTES = 32


def new_key() -> bytes:
    """A fresh secret randomization key from the OS."""
    return secrets.token_bytes(KEY_BYTES)


def commit_key(key: bytes, session_id: str) -> str:
    """The public commitment to ``key``: hex SHA-256 of ``"evalstop-plan-key", session id, key``.

    Binding (SHA-256 is collision resistant) and hiding (the key has 256 random bits).
    """
    return hashlib.sha256(b"evalstop-plan-key\0" + session_id.encode() + b"\0" + key).hexdigest()


def verify_key(key_hex: object, commitment: object, session_id: str) -> bool:
    """True when ``key_hex`` is a ``KEY_BYTES`` key whose commitment is ``commitment``."""
    if not isinstance(key_hex, str) or not isinstance(commitment, str) or len(key_hex) != 2 * KEY_BYTES:
        return False
    try:
        key = bytes.fromhex(key_hex)
    except ValueError:
        return False
    return hmac.compare_digest(commit_key(key, session_id), commitment)


@dataclasses.dataclass(frozen=True)
class Condition:
    """Where a trial starts: a task and one of its initial conditions."""

    task: Task
    initial_condition: InitialCondition


Entropy = tuple[int, ...]


def _rng(seed: Entropy, stream: int, *index: int) -> np.random.Generator:
    return np.random.default_rng([*seed, stream, *index])


@functools.lru_cache(maxsize=4096)
def _permutation(seed: Entropy, stream: int, index: tuple[int, ...], size: int) -> tuple[int, ...]:
    """``_rng(seed, stream, *index).permutation(size)``, drawn once (a schedule asks for it again and again)."""
    return tuple(int(i) for i in _rng(seed, stream, *index).permutation(size))


def _cycled(seed: Entropy, stream: int, key: int, size: int, k: int) -> int:
    """Index of the ``k``-th (1-based) item of endless independent shuffles of ``range(size)``."""
    cycle, position = divmod(k - 1, size)
    return _permutation(seed, stream, (key, cycle), size)[position]


class Plan:
    """The random design of one session, derived from its configuration.

    Parameters
    ----------
    config:
        The session configuration; only ``seed``, ``policies``, ``tasks``, ``blinding`` and
        ``condition_schedule`` are used.
    key:
        The session's secret randomization key (module docstring); ``None``: ``config.seed``
        stands in for it (offline analyses and simulations, where nothing is blinded).

    Examples
    --------
    >>> from evalstop_ros.session.config import parse_config
    >>> config = parse_config({"policies": ["pi0", "pi1", "pi2"], "seed": 3, "tasks": [
    ...     {"id": "t", "initial_conditions": [{"id": f"c{i}", "reset_instructions": "r"} for i in range(3)]}]})
    >>> plan = Plan(config)
    >>> sorted(plan.label(p, 1) for p in config.policies)
    ['X', 'Y', 'Z']
    >>> plan.round_order(1, config.policies) == Plan(config).round_order(1, config.policies)
    True
    >>> sorted(plan.condition(k).initial_condition.id for k in (1, 2, 3))  # one full cycle
    ['c0', 'c1', 'c2']
    """

    def __init__(self, config: SessionConfig, key: bytes | None = None) -> None:
        self.config = config
        self.key = key
        self._entropy: Entropy = (config.seed,) if key is None else tuple(
            int.from_bytes(key[i:i + 4], "little") for i in range(0, len(key), 4))
        self._public: Entropy = (config.seed,)
        self._session_labels = self._labels()

    def _labels(self, *index: int) -> dict[str, str]:
        permutation = _permutation(self._entropy, STREAM_LABELS, index, len(self.config.policies))
        return {policy: LABELS[slot] for policy, slot in zip(self.config.policies, permutation)}

    def label(self, policy: str, round_number: int) -> str:
        """The blinded label of ``policy`` in round ``round_number`` (see ``blinding``)."""
        if self.config.blinding == "per-round":
            return self._labels(round_number)[policy]
        return self._session_labels[policy]

    def round_order(self, round_number: int, active: Sequence[str]) -> tuple[str, ...]:
        """The order in which ``active`` policies run in round ``round_number`` (1-based).

        ``active`` is taken in configuration order, so the answer depends only on the round
        and on which policies are active.
        """
        chosen = set(active)
        members = [p for p in self.config.policies if p in chosen]
        order = _rng(self._entropy, STREAM_ORDER, round_number).permutation(len(members))
        return tuple(members[int(i)] for i in order)

    @staticmethod
    def ucb_weight(rounds: int, threshold: int) -> float:
        """``ab_pairing: ucb``: a policy's weight ``(U / (n + 1)) ** 0.8`` after ``n < U`` rounds,
        else 1 (``U = threshold``; the released RoboArena server's ``times_in_ab_eval`` weight,
        which favours under-evaluated policies)."""
        return (threshold / (rounds + 1)) ** 0.8 if rounds < threshold else 1.0

    def ab_pair(self, round_number: int, pairs: Sequence[tuple[str, str]],
                weights: Mapping[str, float] | None = None) -> tuple[str, str]:
        """``design: ab``: the pair of round ``round_number`` in run order (first = label A's slot).

        Without ``weights``, one of ``pairs`` uniformly at random (seed 001 Alg. 1: "C samples
        two policies"); with them, first a policy of ``pairs`` with probability proportional to
        its weight, then its partner uniformly among its pairs (the released server's draw).
        Then a fair coin for the order (the released server assigns A and B by a coin as well).
        """
        if not pairs:
            raise ValueError("no pair is left to draw")
        rng = _rng(self._entropy, STREAM_AB, round_number)
        if weights is None:
            first, second = pairs[int(rng.integers(len(pairs)))]
        else:
            members = sorted({p for pair in pairs for p in pair})
            w = np.array([weights[p] for p in members], dtype=float)
            first = members[int(rng.choice(len(members), p=w / w.sum()))]
            partners = sorted(q for pair in pairs if first in pair for q in pair if q != first)
            second = partners[int(rng.integers(len(partners)))]
        return (first, second) if rng.random() < 0.5 else (second, first)

    def condition(self, k: int) -> Condition:
        """The ``k``-th (1-based) condition of the schedule.

        ``"shuffled-cycle"``: tasks come in a fresh random order in every cycle of ``T``
        draws, so draw ``k`` is in task cycle ``c = (k - 1) // T`` and is that task's
        ``(c + 1)``-th visit; its condition is the ``(c + 1)``-th item of the task's own
        endless shuffled cycle.  ``"iid"``: a uniform task, then a uniform condition.
        """
        if k < 1:
            raise ValueError(f"`k` must be a positive integer; found {k!r}")
        tasks = self.config.tasks
        if self.config.condition_schedule == "iid":
            rng = _rng(self._entropy, STREAM_TASK, k)
            task_index = int(rng.integers(len(tasks)))
            task = tasks[task_index]
            cond_index = int(_rng(self._entropy, STREAM_CONDITION, task_index, k).integers(len(task.initial_conditions)))
            return Condition(task, task.initial_conditions[cond_index])
        task_index = _cycled(self._entropy, STREAM_TASK, 0, len(tasks), k)
        task = tasks[task_index]
        visit = (k - 1) // len(tasks) + 1
        cond_index = _cycled(self._entropy, STREAM_CONDITION, task_index, len(task.initial_conditions), visit)
        return Condition(task, task.initial_conditions[cond_index])

    def task_condition(self, task_index: int, j: int) -> InitialCondition:
        """The ``j``-th (1-based) initial condition drawn for task ``task_index`` on its own.

        Used by the ``independent`` design with a non-pooled claim, where the round fixes the
        task and every trial draws a condition: the ``j``-th item of the task's endless shuffled
        cycle (``"shuffled-cycle"``), or a uniform draw (``"iid"``).
        """
        if j < 1:
            raise ValueError(f"`j` must be a positive integer; found {j!r}")
        conditions = self.config.tasks[task_index].initial_conditions
        if self.config.condition_schedule == "iid":
            return conditions[int(_rng(self._entropy, STREAM_CONDITION, task_index, j, 0).integers(len(conditions)))]
        return conditions[_cycled(self._entropy, STREAM_CONDITION, task_index, len(conditions), j)]

    def interim_order(self, interim: int, active: Sequence[str], n_per_interim: int) -> tuple[str, ...]:
        """The trials of AdaStop interim ``interim`` (1-based): ``n_per_interim`` per active agent,
        in one random order (agents taken in configuration order, as :meth:`round_order`)."""
        chosen = set(active)
        slots = [p for p in self.config.policies if p in chosen for _ in range(n_per_interim)]
        order = _rng(self._entropy, STREAM_INTERIM, interim).permutation(len(slots))
        return tuple(slots[int(i)] for i in order)

    def adastop_seed(self) -> int:
        """Seed of AdaStop's permutation paths (drawn at construction, before any data)."""
        return int(_rng(self._public, STREAM_ADASTOP).integers(2**63))

    def token(self, session_id: str, trial_id: int) -> str:
        """The trial's token: 12 hex characters of HMAC-SHA256(session secret, trial id)."""
        if self.key is None:
            secret = hashlib.sha256(f"evalstop-token\0{self.config.seed}\0{session_id}".encode()).digest()
        else:
            secret = hashlib.sha256(b"evalstop-token\0" + self.key + b"\0" + session_id.encode()).digest()
        return hmac.new(secret, str(int(trial_id)).encode(), hashlib.sha256).hexdigest()[:TOKEN_LENGTH]

    def step_seed(self, comparison_index: int, metric_index: int) -> int:
        """Seed of STEP's randomized decisions for one comparison x metric (fixed before data)."""
        return int(_rng(self._public, STREAM_STEP, comparison_index, metric_index).integers(2**63))
