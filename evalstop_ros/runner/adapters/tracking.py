"""Commanded motion as a moving reference for a simulated impedance controller (the ``robosuite`` Panda).

A velocity ``v`` held for a period ``dt`` moves a reference by ``v * dt``, and the controller is
sent that reference, not a step from the arm's current pose (which a PD controller never reaches:
the arm crawled at a fraction of the command). A critically damped PD law ``kp (goal - x) - kd x'``
tracks a ramp with a lag of ``kd / kp * v``; the goal therefore leads the reference by ``kd / kp`` s
of motion (velocity feed-forward: ``kp (r - x) + kd (v - x')``) plus half a period (the goal is held
for the whole period, so its average is the reference's).

The reference stays within ``slack + lag_time * |v|`` of the measured pose: far enough for the
arm's start-up transient (a critically damped arm lags at most ``v / (e * sqrt(kp))``, 0.03 s of
motion at robosuite's ``kp = 150``), near enough that an arm held by contact (the table, an object)
neither winds up a growing force nor waits for its reference when the command turns around.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

__all__ = ["LAG_TIME", "MovingOrientation", "MovingReference", "lead_time"]

#: s of commanded motion a reference may run ahead of the measured pose, beyond its slack.
LAG_TIME = 0.06


def lead_time(kp: float, damping_ratio: float = 1.0) -> float:
    """``kd / kp`` (s) of a PD controller with ``kd = 2 * damping_ratio * sqrt(kp)`` (robosuite's gains).

    >>> round(lead_time(150.0), 4)
    0.1633
    """
    return 2.0 * damping_ratio / float(np.sqrt(kp))


class MovingReference:
    """A vector reference (joint positions in rad, or a position in m) advanced by a velocity each period.

    :param start: Where the reference starts (the measured pose: a rollout starts from rest).
    :param lead: The goal's lead over the reference (s, :func:`lead_time`).
    :param slack: Distance (in each component) the reference may lie from the measured pose at rest.
    :param lag_time: Further distance per unit of commanded speed (s, :data:`LAG_TIME`).
    """

    def __init__(self, start: np.ndarray, *, lead: float, slack: float, lag_time: float = LAG_TIME) -> None:
        self.position = np.array(start, dtype=np.float64)
        self.lead, self.slack, self.lag_time = lead, slack, lag_time

    def clamp(self, measured: np.ndarray, speed: float = 0.0) -> np.ndarray:
        """The reference, first brought within ``slack + lag_time * speed`` of the ``measured`` pose in every
        component (an arm's transients couple its components).

        >>> MovingReference(np.array([0.5]), lead=0.1, slack=0.1).clamp(np.zeros(1)).tolist()
        [0.1]
        """
        measured = np.asarray(measured, dtype=np.float64)
        bound = self.slack + self.lag_time * speed
        self.position = np.clip(self.position, measured - bound, measured + bound)
        return self.position

    def advance(self, velocity: np.ndarray, dt: float, measured: np.ndarray, *, speed: float | None = None) -> np.ndarray:
        """The controller's goal for the next ``dt`` s at ``velocity``; the reference moves ``velocity * dt``.

        ``speed`` sets the distance allowed from ``measured`` (:meth:`clamp`); None: the norm of ``velocity``.

        >>> ref = MovingReference(np.zeros(2), lead=0.1, slack=1.0)
        >>> ref.advance(np.array([1.0, 0.0]), 0.2, np.zeros(2)).round(3).tolist(), ref.position.tolist()
        ([0.2, 0.0], [0.2, 0.0])
        """
        velocity = np.asarray(velocity, dtype=np.float64)
        self.clamp(measured, float(np.linalg.norm(velocity)) if speed is None else speed)
        goal = self.position + velocity * (dt / 2 + self.lead)
        self.position = self.position + velocity * dt
        return goal


class MovingOrientation:
    """An orientation reference advanced by an angular velocity (rad/s) each period: ``R <- exp(w dt) R``.

    Rotations are 3x3 matrices in the frame the angular velocity is given in; ``lead``, ``slack``
    (rad) and ``lag_time`` as :class:`MovingReference`, the distance being the angle between rotations.
    """

    def __init__(self, start: np.ndarray, *, lead: float, slack: float, lag_time: float = LAG_TIME) -> None:
        self.rotation = Rotation.from_matrix(np.asarray(start, dtype=np.float64))
        self.lead, self.slack, self.lag_time = lead, slack, lag_time

    def advance(self, angular: np.ndarray, dt: float, measured: np.ndarray) -> Rotation:
        """The goal orientation for the next ``dt`` s at ``angular``; the reference turns by ``angular * dt``.

        >>> ref = MovingOrientation(np.eye(3), lead=0.0, slack=1.0)
        >>> ref.advance(np.array([0.0, 0.0, 1.0]), 0.5, np.eye(3)).as_rotvec().round(3).tolist()
        [0.0, 0.0, 0.25]
        """
        angular = np.asarray(angular, dtype=np.float64)
        now = Rotation.from_matrix(np.asarray(measured, dtype=np.float64))
        apart = (self.rotation * now.inv()).as_rotvec()
        angle, bound = float(np.linalg.norm(apart)), self.slack + self.lag_time * float(np.linalg.norm(angular))
        if angle > bound:
            self.rotation = Rotation.from_rotvec(apart * (bound / angle)) * now
        goal = Rotation.from_rotvec(angular * (dt / 2 + self.lead)) * self.rotation
        self.rotation = Rotation.from_rotvec(angular * dt) * self.rotation
        return goal
