"""Tests of evalstop_ros.session.config: loading, defaults, validation messages, canonical form."""

from __future__ import annotations

import hashlib
import json
import pathlib

import pytest
from pydantic import ValidationError
from session_sim import ADASTOP_SESSION, BASE, make_config

from evalstop_ros.session.config import ConfigError, load_config, parse_config
from evalstop_ros.session.config_input import config_diff
from evalstop_ros.session.journal_format import SCHEMA_VERSION

CONFIG_DIR = pathlib.Path(__file__).resolve().parents[2] / "config"


#: A one-sided progress metric, as the multi-task claims need.
ONE_SIDED = {"metrics": [{"name": "progress", "alternative": "greater"}]}


def _task(**extra: object) -> dict[str, object]:
    return {"id": "t", "initial_conditions": [{"id": "c", "reset_instructions": "reset"}], **extra}


# -- presets ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["eval", "droid", "widowx"])
def test_presets_load(name):
    config = load_config(CONFIG_DIR / f"{name}.yaml")
    assert sum(m.alpha for m in config.metrics) == pytest.approx(config.alpha)
    assert [m.name for m in config.metrics] == ["success", "progress"]


def test_eval_preset_is_the_sim_default():
    config = load_config(CONFIG_DIR / "eval.yaml")
    assert config.policies == ("policy_a", "policy_b")  # sim_robot's default policy ids
    assert len(config.tasks) == 1 and len(config.tasks[0].initial_conditions) == 3
    assert (config.design, config.alpha, config.n_max, config.seed, config.scoring) == ("paired", 0.05, 100, 1, "auto")
    assert [(m.name, m.method) for m in config.metrics] == [("success", "step"), ("progress", "nscore")]
    assert config.runner.action_name == "run_trial"


@pytest.mark.parametrize(("name", "action"), [("droid", "/droid/run_trial"), ("widowx", "/widowx/run_trial")])
def test_robot_presets_are_operator_scored_and_blinded_per_round(name, action):
    config = load_config(CONFIG_DIR / f"{name}.yaml")
    assert config.runner.action_name == action
    assert (config.scoring, config.blinding) == ("operator", "per-round")
    assert all(c.reset_instructions for t in config.tasks for c in t.initial_conditions)


#: Hashes of the presets under journal schema 5 (every field written out).  The canonical form is
#: part of the journal schema: a change to it changes these and must come with a new
#: ``SCHEMA_VERSION``, so that a journal of the old form is refused rather than misread.
PRESET_HASHES = {
    "eval": "b480209ee9cce02d9cb4a0aa174f30fd99d1b8097ad1f8bb06dd57ec51e58d50",
    "droid": "8a9b863e16a1fed3216f6673b0a7fa9716ac94bca0352a73e43add9e000104cb",
    "widowx": "c4b235b1a1d9944899206415e35ee9e71423cb34cde78c5cbd953bbc13ffc4d5",
}


@pytest.mark.parametrize(("name", "digest"), PRESET_HASHES.items())
def test_preset_hashes_are_those_of_the_journal_schema(name, digest):
    config = load_config(CONFIG_DIR / f"{name}.yaml")
    assert SCHEMA_VERSION == "5"
    assert config.config_hash == digest
    assert set(config.to_dict()) == set(type(config).model_fields)  # defaults included


def test_adastop_preset_is_five_agents_on_progress():
    config = load_config(CONFIG_DIR / "adastop_sim.yaml")
    assert config.policies == tuple(f"agent_{i}" for i in range(1, 6))
    assert (config.design, config.scoring, config.comparisons) == ("adastop", "auto", "all-pairs")
    assert [(m.name, m.method, m.alpha) for m in config.metrics] == [("progress", "adastop", 0.05)]
    assert config.adastop is not None
    assert (config.adastop.n_per_interim, config.adastop.n_interims, config.adastop.n_permutations,
            config.adastop.permutation) == (5, 6, 10_000, "closed")
    assert config.comparison_alpha(config.metrics[0]) == 0.05  # AdaStop's own family-wise level


def test_widowx_preset_has_three_carrot_positions_and_distractors():
    (task,) = load_config(CONFIG_DIR / "widowx.yaml").tasks
    ids = [c.id for c in task.initial_conditions]
    assert {"carrot_left", "carrot_front", "carrot_right"} <= set(ids)
    assert any("distractors" in i for i in ids)


# -- defaults ---------------------------------------------------------------------------------
def test_defaults_are_resolved_into_the_config():
    config = parse_config({"policies": ["a", "b"], "seed": 0, "tasks": [_task()]})
    assert [(m.name, m.method, m.alpha, m.bins, m.alternative) for m in config.metrics] == [
        ("success", "step", 0.025, None, "two-sided"),
        ("progress", "nscore", 0.025, 21, "two-sided"),
    ]
    assert (config.comparisons, config.correction, config.design, config.blinding) == (
        "all-pairs", "bonferroni", "paired", "per-session")
    assert (config.alpha, config.n_max, config.scoring, config.drop_decided) == (0.05, 100, "operator", True)
    assert (config.runner.action_name, config.runner.timeout_s) == ("run_trial", 300.0)


def test_metric_alpha_left_over_is_split_among_unset_metrics():
    config = make_config(alpha=0.05, metrics=[{"name": "success", "alpha": 0.01}, {"name": "progress"}])
    assert [m.alpha for m in config.metrics] == pytest.approx([0.01, 0.04])


def test_success_bins_default_for_nscore():
    config = make_config(metrics=[{"name": "success", "method": "nscore"}])
    assert (config.metrics[0].bins, config.metrics[0].alpha) == (2, 0.1)


def test_comparison_alpha_is_bonferroni_over_comparisons():
    config = make_config(policies=["a", "b", "c"], metrics=[{"name": "progress", "alpha": 0.06}])
    assert [(c.policy_a, c.policy_b) for c in config.comparison_list()] == [("a", "b"), ("a", "c"), ("b", "c")]
    assert config.comparison_alpha(config.metrics[0]) == pytest.approx(0.02)


@pytest.mark.parametrize(("claim", "given", "resolved", "level"), [
    ("every", None, "iut", 0.02),  # intersection-union: each task at the comparison's level
    ("every", "bonferroni", "bonferroni", 0.01),  # seed 003 §V-C3: level / T
    ("any", None, "bonferroni", 0.01),
    ("per-task", "holm", "holm", 0.01),  # Holm's first threshold
])
def test_task_correction_default_and_task_level(claim, given, resolved, level):
    tasks = [{"id": t, "initial_conditions": [{"id": "c", "reset_instructions": "r"}]} for t in ("a", "b")]
    config = make_config(policies=["a", "b", "c"], tasks=tasks, claim=claim, task_correction=given,
                         metrics=[{"name": "progress", "alpha": 0.06, "alternative": "greater"}])
    assert config.task_correction == resolved and config.to_dict()["task_correction"] == resolved
    assert config.comparison_alpha(config.metrics[0]) == pytest.approx(0.02)
    assert config.test_alpha(config.metrics[0]) == pytest.approx(level)


def test_adastop_defaults_to_one_progress_metric_with_the_whole_alpha():
    config = make_config(**{k: v for k, v in ADASTOP_SESSION.items() if k != "metrics"})
    assert [(m.name, m.method, m.alpha, m.bins) for m in config.metrics] == [("progress", "adastop", 0.05, None)]
    assert config.adastop is not None and config.adastop.permutation == "closed"


def test_vs_baseline_orients_the_baseline_as_policy_a():
    config = make_config(policies=["a", "ref", "c"], comparisons="vs-baseline", baseline="ref")
    assert [(c.policy_a, c.policy_b) for c in config.comparison_list()] == [("ref", "a"), ("ref", "c")]


# -- validation messages ------------------------------------------------------------------------
INVALID = [
    ({"alpah": 0.1}, r"config: unknown key 'alpah' \(did you mean 'alpha'\?\)"),
    ({"tasks": [{"id": "t", "initial_conditions": [{"id": "c", "reset_instruction": "r"}]}]},
     r"tasks\[0\]\.initial_conditions\[0\]: unknown key 'reset_instruction' \(did you mean 'reset_instructions'\?\)"),
    ({"alpha": 0.0}, r"alpha: must lie in \(0, 1\); found 0\.0"),
    ({"alpha": 1.5}, r"alpha: must lie in \(0, 1\); found 1\.5"),
    ({"policies": ["a"]}, r"policies: must name 2 to 26 policies; found 1"),
    ({"policies": ["a", "b", "a"]}, r"policies: policy ids must be unique; found 'a' twice"),
    ({"policies": ["a b", "c"]}, r"policies\[0\]: must be an identifier .*; found 'a b'"),
    ({"comparisons": "vs-baseline"}, r"`baseline` is required with comparisons 'vs-baseline'"),
    ({"comparisons": "vs-baseline", "baseline": "pi9"}, r"`baseline` must be one of `policies` \['pi0', 'pi1'\]; found 'pi9'"),
    ({"baseline": "pi0"}, r"`baseline` applies only to comparisons 'vs-baseline'; found 'pi0'"),
    ({"metrics": [{"name": "progress", "method": "step"}]},
     r"metrics\[0\]: metric 'progress' cannot use method 'step', which needs binary success data"),
    ({"metrics": [{"name": "progress", "method": "savi"}]}, r"cannot use method 'savi'"),
    ({"metrics": [{"name": "success", "method": "ttest"}]},
     r"metrics\[0\]\.method: should be one of \('step', 'nscore', 'wsr', 'savi', 'mixture', 'lai', 'adastop'\); found 'ttest'"),
    ({"metrics": [{"name": "speed"}]}, r"metrics\[0\]\.name: Input should be 'success' or 'progress'; found 'speed'"),
    ({"metrics": [{"name": "success", "bins": 3}]}, r"`bins` applies only to method 'nscore'; found bins=3 with 'step'"),
    ({"metrics": [{"name": "progress", "bins": 1}]}, r"`bins` must be an integer in \[2, 10000\] for method 'nscore'; found 1"),
    ({"metrics": [{"name": "success"}, {"name": "success"}]}, r"metrics: metric names must be unique; found 'success' twice"),
    ({"metrics": []}, r"metrics: Tuple should have at least 1 item"),
    ({"metrics": [{"name": "success", "alpha": 0.06}, {"name": "progress", "alpha": 0.06}]},
     r"metric alphas \(success=0\.06, progress=0\.06\) sum to 0\.12, more than `alpha` 0\.1"),
    ({"metrics": [{"name": "success", "alpha": 0.1}, {"name": "progress"}]},
     r"no alpha left for metric\(s\) \['progress'\]"),
    ({"metrics": [{"name": "success", "alpha": 2}]}, r"metrics\[0\]\.alpha: must lie in \(0, 1\); found 2"),
    ({"correction": "holm"},
     r"correction 'holm' needs anytime-valid p-values; metric 'success' uses method 'step', which defines none"),
    ({"correction": "sidak"}, r"correction: Input should be 'bonferroni' or 'holm'; found 'sidak'"),
    ({"design": "crossed"}, r"design: Input should be 'paired', 'independent', 'adastop' or 'ab'; found 'crossed'"),
    ({"n_max": 0}, r"n_max: Input should be greater than or equal to 1; found 0"),
    ({"seed": -1}, r"seed: Input should be greater than or equal to 0; found -1"),
    ({"tasks": []}, r"tasks: Tuple should have at least 1 item"),
    ({"tasks": [_task(), _task()]}, r"tasks: task ids must be unique; found 't' twice"),
    ({"tasks": [{"id": "t", "initial_conditions": [{"id": "c", "reset_instructions": "r"}] * 2}]},
     r"tasks\[0\]\.initial_conditions: initial condition ids must be unique; found 'c' twice"),
    ({"tasks": [{"id": "t", "initial_conditions": [{"id": "c", "reset_instructions": "  "}]}]},
     r"tasks\[0\]\.initial_conditions\[0\]\.reset_instructions: String should have at least 1 character"),
    ({"runner": {"timeout_s": 0}}, r"runner\.timeout_s: Input should be greater than 0; found 0"),
    ({"scoring": "crowd"}, r"scoring: Input should be 'operator' or 'auto'; found 'crowd'"),
    ({"blinding": "none"}, r"blinding: Input should be 'per-session' or 'per-round'; found 'none'"),
    # multi-task claims
    ({"claim": "all"}, r"claim: Input should be 'pooled', 'every', 'any' or 'per-task'; found 'all'"),
    ({"task_correction": "holm"}, r"`task_correction` applies only to a non-pooled claim; found 'holm' with claim "
     r"'pooled'"),
    ({"claim": "every", "task_correction": "holm", **ONE_SIDED},
     r"`task_correction` for claim 'every' should be one of \('iut', 'bonferroni'\); found 'holm'"),
    ({"claim": "any", "task_correction": "iut", **ONE_SIDED},
     r"`task_correction` for claim 'any' should be one of \('bonferroni', 'holm'\); found 'iut'"),
    ({"claim": "any", "correction": "holm", **ONE_SIDED},
     r"claim 'any' runs one test per task with Bonferroni over the comparisons; `correction` must be 'bonferroni'"),
    ({"claim": "every", "metrics": [{"name": "progress"}]},
     r"claim 'every' is directional: metric 'progress' needs alternative 'greater' \(policy_b better\) or 'less'; "
     r"found 'two-sided'"),
    ({"claim": "per-task", "task_correction": "holm", "metrics": [{"name": "success", "alternative": "greater"}]},
     r"task_correction 'holm' needs anytime-valid p-values; metric 'success' uses method 'step', which defines none"),
    # AdaStop
    ({"design": "adastop"}, r"`adastop` \(n_per_interim, n_interims\) is required with design 'adastop'"),
    ({"adastop": {"n_per_interim": 5, "n_interims": 6}}, r"`adastop` applies only to design 'adastop'"),
    ({"metrics": [{"name": "progress", "method": "adastop"}]},
     r"method 'adastop' of metric 'progress' needs design 'adastop'; found design 'paired'"),
    ({**ADASTOP_SESSION, "metrics": [{"name": "success"}, {"name": "progress"}]},
     r"design 'adastop' compares one metric; found 2 metrics"),
    ({**ADASTOP_SESSION, "metrics": [{"name": "progress", "method": "nscore"}]},
     r"design 'adastop' runs method 'adastop'; metric 'progress' names method 'nscore'"),
    ({**ADASTOP_SESSION, "metrics": [{"name": "progress", "alternative": "greater"}]},
     r"design 'adastop' is two-sided; metric 'progress' has alternative 'greater'"),
    ({**ADASTOP_SESSION, "correction": "holm"}, r"design 'adastop' shares alpha by its own step-down permutation "
     r"boundaries; `correction` must stay 'bonferroni'; found 'holm'"),
    ({**ADASTOP_SESSION, "claim": "any"}, r"design 'adastop' pools the tasks; `claim` must be 'pooled'; found 'any'"),
    ({**ADASTOP_SESSION, "drop_decided": False}, r"design 'adastop' drops decided agents itself \(seed 002 §3\.7\)"),
    ({**ADASTOP_SESSION, "adastop": {"n_per_interim": 0, "n_interims": 6}},
     r"adastop\.n_per_interim: Input should be greater than or equal to 1; found 0"),
    ({**ADASTOP_SESSION, "adastop": {"n_per_interim": 5}}, r"adastop\.n_interims: required key is missing"),
    ({**ADASTOP_SESSION, "adastop": {"n_per_interim": 5, "n_interims": 6, "permutations": 10}},
     r"adastop: unknown key 'permutations' \(did you mean 'permutation'\?\)"),
    ({**ADASTOP_SESSION, "adastop": {"n_per_interim": 5, "n_interims": 6, "permutation": "swap"}},
     r"adastop\.permutation: Input should be 'closed', 'relabel' or 'split'; found 'swap'"),
    ({**ADASTOP_SESSION, "policies": [f"p{i}" for i in range(8)]},
     r"adastop\.permutation 'closed' tests every partition of the agents \(4139 for 8 policies, at most 1000\); "
     r"use comparisons 'vs-baseline'"),
]


@pytest.mark.parametrize(("change", "message"), INVALID)
def test_invalid_config_is_refused_with_its_reason(change, message):
    with pytest.raises(ConfigError, match=message):
        make_config(**change)


def test_missing_seed_is_refused():
    data = {k: v for k, v in BASE.items() if k != "seed"}
    with pytest.raises(ConfigError, match=r"seed: required key is missing"):
        parse_config(data)


def test_config_error_names_the_source_and_chains_the_validation_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("policies: [a]\nseed: 1\ntasks: []\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.path == str(path)
    assert str(info.value).startswith(f"{path}: ")
    assert "policies: must name 2 to 26 policies; found 1" in info.value.detail
    assert isinstance(info.value.__cause__, ValidationError)


def test_unreadable_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"cannot read the file"):
        load_config(tmp_path / "missing.yaml")


def test_invalid_yaml_is_a_config_error(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("policies: [a, b\n")
    with pytest.raises(ConfigError, match=r"not valid YAML"):
        load_config(path)


def test_top_level_must_be_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match=r"the configuration must be a mapping; found list"):
        load_config(path)


# -- canonical form ---------------------------------------------------------------------------
def test_config_is_frozen():
    config = make_config()
    with pytest.raises(ValidationError, match="frozen"):
        config.alpha = 0.2  # type: ignore[misc]


def test_canonical_json_is_sorted_compact_and_hashed():
    config = make_config()
    text = config.canonical_json()
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert config.config_hash == hashlib.sha256(text.encode()).hexdigest()


def test_canonical_json_round_trips_to_the_same_hash():
    config = make_config(policies=["a", "b", "c"], correction="holm",
                         metrics=[{"name": "progress", "method": "wsr"}])
    again = parse_config(json.loads(config.canonical_json()))
    assert again == config and again.config_hash == config.config_hash


def test_yaml_and_dict_give_the_same_hash(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps(BASE))  # JSON is YAML
    assert load_config(path).config_hash == make_config().config_hash


def test_hash_changes_with_any_design_field():
    hashes = {make_config(**change).config_hash for change in ({}, {"alpha": 0.2}, {"n_max": 100}, {"seed": 12})}
    assert len(hashes) == 4


def test_new_fields_at_their_defaults_leave_the_hash_alone():
    # An explicit `claim: pooled` is the default: left out of the dump, same hash as omitting it.
    assert make_config(claim="pooled").config_hash == make_config().config_hash
    assert make_config(claim="any", **ONE_SIDED).config_hash != make_config(**ONE_SIDED).config_hash


@pytest.mark.parametrize("change", [
    {"claim": "per-task", "task_correction": "holm", **ONE_SIDED},
    ADASTOP_SESSION,
])
def test_new_fields_round_trip_through_the_canonical_json(change):
    config = make_config(**change)
    again = parse_config(json.loads(config.canonical_json()))
    assert again == config and again.config_hash == config.config_hash


def test_config_diff_names_added_removed_and_changed_fields():
    old = {"alpha": 0.05, "runner": {"timeout_s": 1.0}, "gone": 1, "metrics": [{"method": "step"}]}
    new = {"alpha": 0.1, "runner": {"timeout_s": 1.0}, "new": 2, "metrics": [{"method": "nscore"}]}
    assert config_diff(old, new) == [
        "alpha: 0.05 -> 0.1", "gone: removed (was 1)", "metrics[0].method: 'step' -> 'nscore'", "new: added 2",
    ]
