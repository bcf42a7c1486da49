"""The sim-eval configuration: a session configuration plus its `simulation` section, each error named."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from evalstop_ros.parallel.sim_config import load_sim_eval
from evalstop_ros.session.errors import ConfigError

PRESET = pathlib.Path(__file__).resolve().parents[2] / "examples" / "sim_eval.yaml"


def _write(tmp_path: pathlib.Path, change: dict[str, object]) -> pathlib.Path:
    data = yaml.safe_load(PRESET.read_text())
    for key, value in change.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    path = tmp_path / "sim.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_preset_loads_with_an_entry_per_task_and_policy() -> None:
    session, simulation = load_sim_eval(PRESET)
    assert set(simulation.tasks) == {t.id for t in session.tasks}
    assert set(simulation.policies) == set(session.policies)
    assert session.claim == "per-task" and session.task_correction == "holm"


@pytest.mark.parametrize(("change", "match"), [
    ({"simulation": None}, "needs a `simulation` section"),
    ({"simulation": {"tasks": {}, "policies": {}}}, r"simulation.tasks: no entry for \['lift_centre'"),
    # a policy named in both ways, and a scripted kind that does not exist
    ({"simulation": {"tasks": {}, "policies": {"a": {"serve": "exact", "host": "h", "port": 1}}}},
     "either `serve`"),
    ({"simulation": {"tasks": {}, "policies": {"a": {"serve": "clever"}}}}, "`serve` must be one of"),
    ({"simulation": {"tasks": {}, "policies": {}, "horizon": 3}}, "simulation: unknown key 'horizon'"),
])
def test_a_bad_simulation_section_is_named(tmp_path: pathlib.Path, change: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_sim_eval(_write(tmp_path, change))


def test_a_task_the_session_lacks_is_refused(tmp_path: pathlib.Path) -> None:
    data = yaml.safe_load(PRESET.read_text())
    data["simulation"]["tasks"]["lift_moon"] = {"env": "Lift"}
    path = tmp_path / "sim.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"\['lift_moon'\] not in the session's tasks"):
        load_sim_eval(path)


def test_each_worker_is_a_runner_of_the_session(tmp_path: pathlib.Path) -> None:
    session, _ = load_sim_eval(PRESET, workers=3)
    assert session.runner.actions == ("ray_worker_1", "ray_worker_2", "ray_worker_3")
    path = _write(tmp_path, {"runner": {"runners": ["gpu_a", "gpu_b"]}})
    assert load_sim_eval(path, workers=2)[0].runner.actions == ("gpu_a", "gpu_b")  # the file's own names
    with pytest.raises(ConfigError, match=r"runner.runners names \['gpu_a', 'gpu_b'\]; sim-eval runs 3 workers"):
        load_sim_eval(path, workers=3)
