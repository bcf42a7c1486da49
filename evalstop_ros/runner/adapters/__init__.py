"""Robot adapters: one small interface (:class:`~.base.RobotAdapter`), one module per robot, imported only when selected.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import RunnerError
from .base import RobotAdapter

__all__ = ["ADAPTERS", "RobotAdapter", "make_adapter"]

#: adapter name -> "module:class" (relative to this package)
ADAPTERS = {"sim": "sim:SimArm", "ros2": "ros2:Ros2Arm", "droid": "droid:DroidArm", "widowx": "widowx:WidowXArm",
            "robosuite": "robosuite:RobosuiteArm"}


def make_adapter(name: str, **options: Any) -> RobotAdapter:
    """The adapter ``name`` built with ``options``; :class:`RunnerError` for an unknown name."""
    if name not in ADAPTERS:
        raise RunnerError(f"unknown robot adapter {name!r} (known: {', '.join(ADAPTERS)})")
    module, cls = ADAPTERS[name].split(":")
    adapter: RobotAdapter = getattr(importlib.import_module(f"{__name__}.{module}"), cls)(**options)
    return adapter
