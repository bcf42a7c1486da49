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
    journal = next(tmp_path.glob("demo-*.db"))
    assert f"journal: {journal}\nreport:  evalstop report {journal} -o {tmp_path / 'report'}" in done.stdout
    assert re.search(r"trial +\d+ \| \d+ s(, at most \d+ s left)? \| ", done.stdout)  # progress, ETA


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


def _failing_demo(ros_env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(DEMO), *args], env=ros_env, capture_output=True, text=True, timeout=timeout, check=False)


def test_a_config_the_robot_cannot_run_is_refused_before_any_node_starts(ros_env: dict[str, str],
                                                                         tmp_path: pathlib.Path) -> None:
    """Policies sim_robot does not serve, and an invalid config: the reason on the terminal, exit 2,
    no node started (no journal directory made)."""
    unserved = _failing_demo(ros_env, "--config", str(REPO / "config" / "adastop_sim.yaml"),
                             "--journal-dir", str(tmp_path / "a"))
    assert unserved.returncode == 2, unserved.stdout + unserved.stderr
    assert "compares agent_1, agent_2, agent_3, agent_4, agent_5, but sim_robot serves only policy_a, policy_b" \
        in unserved.stderr
    assert "--policies agent_1,agent_2,agent_3,agent_4,agent_5" in unserved.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("policies: [policy_a, policy_b]\nalpha: 2\n")
    invalid = _failing_demo(ros_env, "--config", str(bad), "--journal-dir", str(tmp_path / "b"))
    assert invalid.returncode == 2 and f"{bad}: " in invalid.stderr and "alpha: must lie in (0, 1)" in invalid.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_session_waiting_for_a_human_says_so(ros_env: dict[str, str], tmp_path: pathlib.Path) -> None:
    """``scoring: operator``: announced at the start, and the trial's wait for a score said on the
    terminal within seconds (the demo then gives up at its timeout, and says so).

    The wait is said after 5 s of it; the timeout is the test's wall time. 15 s leaves an idle
    machine's start-up (2-3 s) room; a loaded machine whose nodes took longer than that to start
    gets a second run at 40 s (the timeout said as such either way)."""
    config = yaml.safe_load((REPO / "config" / "eval.yaml").read_text())
    config["scoring"] = "operator"
    path = tmp_path / "operator.yaml"
    path.write_text(yaml.safe_dump(config))
    waits = r"trial \d+ waits for an operator's score \(the config's `scoring` is not `auto`\)"
    for timeout in (15, 40):
        journals = tmp_path / f"j{timeout}"
        done = _failing_demo(ros_env, "--config", str(path), "--journal-dir", str(journals), "--timeout", str(timeout))
        if re.search(waits, done.stderr):
            break
    assert done.returncode == 1
    assert "scoring: operator" in done.stdout and "every trial waits for a human's score" in done.stdout
    assert re.search(waits, done.stderr), done.stdout[-2000:] + done.stderr[-2000:]
    # the timeout is said as such, with what was done and where the unfinished session is
    assert re.search(rf"no decision within {timeout} s \(--timeout\) after 0 scored trials; the session was stopped "
                     r"unfinished \(its journal and node logs: ", done.stderr), done.stderr[-2000:]
