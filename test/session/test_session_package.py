"""The session package loads a submodule alone (what a runner or a scorer imports) and the engine on first use."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import evalstop_ros.session as session_package

#: The engine and what only it needs (config models, journal database, statistics).
ENGINE = ("evalstop_ros.stats", "evalstop_ros.session.session", "evalstop_ros.session.config",
          "evalstop_ros.session.journal", "pydantic", "sqlite3")


def test_a_submodule_loads_without_the_engine_which_loads_on_first_use() -> None:
    probe = ("import json, sys; from evalstop_ros.session import errors; before = sorted(sys.modules);"
             "from evalstop_ros.session import EvaluationSession, auth;"
             "print(json.dumps([before, EvaluationSession.__module__, auth.__name__]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    before, engine_module, auth_module = json.loads(done.stdout)
    loaded = sorted(n for n in before if any(n == p or n.startswith(p + ".") for p in ENGINE))
    assert not loaded, f"`from evalstop_ros.session import errors` loads {loaded}"
    assert (engine_module, auth_module) == ("evalstop_ros.session.session", "evalstop_ros.session.auth")


def test_every_public_name_resolves_and_an_unknown_one_is_an_attribute_error() -> None:
    for name in session_package.__all__:
        assert getattr(session_package, name).__module__.startswith("evalstop_ros.session."), name
    assert set(session_package.__all__) <= set(dir(session_package))
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchName'"):
        session_package.NoSuchName  # noqa: B018
