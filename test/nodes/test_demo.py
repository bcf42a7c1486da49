"""``evalstop_demo`` end to end: what ``make demo`` and ``make demo-policy`` run (the latter here with
the project's own policy server instead of openpi's, which needs its separate virtualenv)."""

from __future__ import annotations

import pathlib
import re
import subprocess

import yaml
from nodes_support import LIB

REPO = pathlib.Path(__file__).resolve().parents[2]
DEMO = LIB / "evalstop_demo"


def _demo(ros_env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(DEMO), "--timeout", "150", *args], env=ros_env, capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def test_demo_reaches_decisions_the_offline_analysis_agrees_with(ros_env: dict[str, str],
                                                                 tmp_path: pathlib.Path) -> None:
    done = _demo(ros_env, "--duration", "0", "--journal-dir", str(tmp_path))
    assert re.search(r"session demo-\S+ finished after \d+ scored trials", done.stdout)
    assert "agrees with every live decision" in done.stdout
    assert "node exit codes {'evaluation_manager': 0, 'sim_robot': 0}" in done.stdout


def test_policy_demo_confirms_every_reset_with_signed_controls(ros_env: dict[str, str],
                                                               tmp_path: pathlib.Path) -> None:
    # the manager requires signed controls (throw-away keys): an unsigned confirmation would stall it
    config = yaml.safe_load((REPO / "config" / "sim_policy.yaml").read_text())
    config["n_max"] = 4
    path = tmp_path / "sim_policy.yaml"
    path.write_text(yaml.safe_dump(config))
    done = _demo(ros_env, "--robot", "sim_policy", "--config", str(path), "--journal-dir", str(tmp_path / "j"))
    trials = int(re.search(r"finished after (\d+) scored trials", done.stdout).group(1))  # type: ignore[union-attr]
    confirmed = int(re.search(r"the automatic operator confirmed (\d+) scene resets", done.stdout).group(1))  # type: ignore[union-attr]
    assert confirmed >= trials > 0
    assert "agrees with every live decision" in done.stdout
