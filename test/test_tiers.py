"""The root conftest's tiers at collection: ``-m serial`` (``make test``'s last run) collects only the
modules that hold a ``serial`` test."""

from __future__ import annotations

import importlib.util
import pathlib
from types import SimpleNamespace

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _root_conftest() -> object:
    spec = importlib.util.spec_from_file_location("root_conftest_for_tiers", ROOT / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config(markexpr: str) -> SimpleNamespace:
    return SimpleNamespace(rootpath=ROOT, getoption=lambda name, default=None: markexpr if name == "markexpr" else default)


def test_under_m_serial_only_the_modules_with_serial_tests_are_collected() -> None:
    conftest = _root_conftest()
    ignore = conftest.pytest_ignore_collect  # type: ignore[attr-defined]
    serial = sorted(conftest._SERIAL_TESTS)  # type: ignore[attr-defined]
    assert serial and all(ignore(ROOT / path, _config("serial")) is None for path in serial)
    for other in ("test/stats/test_batch.py", "evalstop_ros/stats/step.py"):
        assert ignore(ROOT / other, _config("serial")) is True
        assert ignore(ROOT / other, _config("not serial")) is None  # any other expression: everything
    assert ignore(ROOT / "test/conftest.py", _config("serial")) is None and ignore(ROOT / "test", _config("serial")) is None

