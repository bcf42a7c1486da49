"""Every config value is range-checked and the file decoded before anything is journaled
(issue 19: ``n_max: 1e12``, ``bins: 1e9`` or a non-UTF-8 file crashed the manager after the
config event was journaled, so that session id could not be used again)."""

from __future__ import annotations

import pytest
import session_sim as sim
import yaml

from evalstop_ros.session import EvaluationSession
from evalstop_ros.session.config import ConfigError, load_config

PROGRESS = {"name": "progress", "method": "nscore", "alpha": 0.05}
BAD = {
    "n_max 1e12": ({"n_max": 1e12}, r"n_max: Input should be less than or equal to 100000; found 1000000000000\.0"),
    "bins 1e9": ({"metrics": [{**PROGRESS, "bins": 1e9}]},
                 r"metrics\[0\]: `bins` must be an integer in \[2, 10000\] for method 'nscore'; found 1000000000"),
    "STEP n_max": ({"n_max": 6000, "metrics": [{"name": "success", "method": "step", "alpha": 0.05}]},
                   r"`n_max` 6000 is too large for STEP"),
    "seed": ({"seed": 2**70}, r"seed: Input should be less than or equal to 18446744073709551615"),
    "timeout inf": ({"runner": {"timeout_s": float("inf")}}, r"runner\.timeout_s: Input should be a finite number"),
    "adastop budget": ({"design": "adastop", "metrics": [{"name": "success", "method": "adastop"}],
                        "adastop": {"n_per_interim": 10_000, "n_interims": 1_000}},
                       r"n_per_interim x n_interims = 10000000 trials per agent; at most 100000"),
    "permutations": ({"design": "adastop", "metrics": [{"name": "success", "method": "adastop"}],
                      "adastop": {"n_per_interim": 5, "n_interims": 4, "n_permutations": 10**9}},
                     r"adastop\.n_permutations: Input should be less than or equal to 100000"),
    "tasks": ({"tasks": [{"id": f"t{i}", "initial_conditions": [{"id": "c", "reset_instructions": "r"}]}
                         for i in range(1001)]}, r"tasks: .*at most 1000 items"),
    "long text": ({"tasks": [{"id": "t", "description": "x" * 5000,
                              "initial_conditions": [{"id": "c", "reset_instructions": "r"}]}]},
                  r"tasks\[0\]\.description: .*at most 4000 characters"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_each_bad_value_is_one_line_before_any_journal_and_the_id_stays_usable(tmp_path, case):
    overrides, message = BAD[case]
    path = tmp_path / "session.yaml"
    path.write_text(yaml.safe_dump({**sim.BASE, **overrides}))
    with pytest.raises(ConfigError, match=message) as info:
        load_config(path)
    assert "\n" not in str(info.value) and str(info.value).startswith(str(path))
    assert list(tmp_path.glob("s1.db*")) == []
    with EvaluationSession.open(tmp_path / "s1.db", sim.make_config(), "s1", durable=False) as session:
        session.start()  # the same id, once the configuration is fixed
        assert session.next_trial() is not None


def test_a_file_that_is_not_utf8_is_a_clear_error(tmp_path):
    path = tmp_path / "session.yaml"
    path.write_bytes(yaml.safe_dump(sim.BASE).encode().replace(b"pi0", b"p\xe90", 1))
    with pytest.raises(ConfigError, match=r"session\.yaml: not UTF-8 text \(byte 0xe9 at offset \d+\): save the "
                       "configuration as UTF-8"):
        load_config(path)
