"""Running served policies on robots (ROS-free, importable without rclpy).

* :mod:`.wire` / :mod:`.client`: openpi's WebSocket + msgpack-numpy protocol, client side;
  :mod:`.server`: the same protocol, server side (test and demo policy servers);
* :mod:`.adapters`: the robot interface (observe, act, reset to home, stop) and its
  implementations ``sim``, ``ros2``, ``droid``, ``widowx`` (the last three imported lazily);
* :mod:`.guard`: the command guard: every action checked against the robot's limits
  (:class:`~.guard.CommandLimits`, declared by each adapter) and rate-limited before ``act``;
* :mod:`.episode`: one rollout: observation building, open-loop action chunks at a fixed rate
  (no catch-up, a watchdog), gripper thresholding and joint-velocity clipping, the guard;
* :mod:`.errors`: the one exception type, the operator's failure categories and error ids, the
  private error log;
* :mod:`.scripted`: the scripted "good" / "bad" policies of the tests and the policy demo
  (numpy only, so openpi's own server can serve them from its separate virtualenv);
* :mod:`.trials`: idempotent runs keyed by (session, trial, attempt) and the policy-server map.

This file imports nothing, so ``evalstop_ros.runner.scripted`` loads in a venv without the
project's dependencies.
"""
