"""Tests of evalstop_ros.stats.registry: building processes and running tests by method name."""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

from evalstop_ros.stats.errors import StatsInputError
from evalstop_ros.stats.registry import METHODS, make_process, run_test
from evalstop_ros.stats.sequential import Decision, SequentialResult, run_sequence


@pytest.fixture(autouse=True)
def _step_cache(tmp_path_factory, monkeypatch):
    # STEP tables synthesized by these tests go to a throw-away cache, never the user's.
    monkeypatch.setenv("EVALSTOP_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "step-cache"))


def method_module(method: str):
    return importlib.import_module(f"evalstop_ros.stats.{METHODS[method].module}")


# Bernoulli pairs where B is clearly better: every method decides on them within 60 trials.
RNG = np.random.default_rng(20240)
SCORES_A = (RNG.random(60) < 0.2).astype(float)
SCORES_B = (RNG.random(60) < 0.85).astype(float)
OPTIONS = {"alpha": 0.05, "alternative": "two-sided", "n_max": 60, "seed": 3, "bins": 3, "c": 0.9}


def same_result(left: SequentialResult, right: SequentialResult) -> bool:
    return left.to_dict() == right.to_dict()


def test_methods_are_the_five_sequential_tests():
    assert tuple(METHODS) == ("step", "nscore", "wsr", "savi", "mixture", "lai")


def test_methods_is_read_only():
    with pytest.raises(TypeError):
        METHODS["ttest"] = METHODS["nscore"]  # type: ignore[index]


@pytest.mark.parametrize("method", list(METHODS))
def test_make_process_builds_a_fresh_process(method):
    method_module(method)
    process = make_process(method, 4, **OPTIONS)
    assert process.name == method
    assert process.alpha == 0.05
    assert process.n == 0
    assert process.decision.shape == process.stopping_trial.shape == (4,)
    assert (process.decision == Decision.CONTINUE).all()


# Each method's own test function, called with exactly the options it takes.
DIRECT = {
    "step": lambda m: m.step_test(SCORES_A, SCORES_B, alpha=0.05, alternative="two-sided", n_max=60, seed=3),
    "nscore": lambda m: m.nscore_test(SCORES_A, SCORES_B, alpha=0.05, alternative="two-sided", bins=3, n_max=60),
    "wsr": lambda m: m.wsr_test(SCORES_A, SCORES_B, alpha=0.05, alternative="two-sided", c=0.9, n_max=60),
    "savi": lambda m: m.savi_test(SCORES_A, SCORES_B, alpha=0.05, alternative="two-sided", n_max=60),
    "mixture": lambda m: m.mixture_test(SCORES_A, SCORES_B, alpha=0.05, alternative="two-sided", n_max=60),
    "lai": lambda m: m.lai_test(SCORES_A, SCORES_B, alpha=0.05, alternative="two-sided", n_max=60),
}


@pytest.mark.parametrize("method", list(METHODS))
def test_run_test_is_the_methods_own_test_function(method):
    direct = DIRECT[method](method_module(method))
    assert direct.decision == Decision.B_BETTER  # the data are informative: a real comparison
    assert same_result(run_test(method, SCORES_A, SCORES_B, **OPTIONS), direct)


@pytest.mark.parametrize("method", list(METHODS))
def test_make_process_replays_like_run_test(method):
    # the factory and the test function are the same test: online use == retrospective analysis
    method_module(method)
    replay = run_sequence(make_process(method, 1, **OPTIONS), SCORES_A, SCORES_B, alternative="two-sided", n_max=60)
    assert same_result(replay, run_test(method, SCORES_A, SCORES_B, **OPTIONS))


def test_options_reach_the_method():
    method_module("nscore")
    method_module("wsr")
    assert make_process("nscore", 1, alpha=0.05, alternative="greater", n_max=None, bins=5).bins == 5
    assert make_process("wsr", 1, alpha=0.05, alternative="less", n_max=None, c=0.5).c == 0.5


def test_anytime_methods_ignore_n_max_in_the_process_but_not_in_the_analysis():
    method_module("nscore")
    assert make_process("nscore", 1, alpha=0.05, alternative="greater", n_max=None).n == 0
    res = run_test("nscore", [0.5] * 20, [0.5] * 20, alpha=0.05, n_max=10)
    assert (res.decision, res.n_observed) == (Decision.BUDGET_EXHAUSTED, 10)


def test_registry_lists_modules_that_define_what_it_names():
    for method in METHODS.values():
        try:
            module = importlib.import_module(f"evalstop_ros.stats.{method.module}")
        except ModuleNotFoundError:
            continue
        assert callable(getattr(module, method.process)) and callable(getattr(module, method.test))


def test_method_spec_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        METHODS["nscore"].module = "wsr"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: make_process("ttest", 1, alpha=0.05, alternative="two-sided", n_max=10),
         r"`method` should be one of \('step', 'nscore', 'wsr', 'savi', 'mixture', 'lai'\); found 'ttest'"),
        (lambda: run_test("barnard", [0], [1], alpha=0.05), r"found 'barnard'"),
        (lambda: make_process(None, 1, alpha=0.05, alternative="two-sided", n_max=10), "found None"),
        (lambda: make_process("nscore", 0, alpha=0.05, alternative="two-sided", n_max=None),
         "`n_sequences` must be a positive integer; found 0"),
        (lambda: make_process("nscore", 1, alpha=1.5, alternative="two-sided", n_max=None),
         r"`alpha` must lie in \(0, 1\); found 1.5"),
        (lambda: run_test("wsr", [0], [1], alpha=0.05, alternative="both"),
         "`alternative` should be one of .*; found 'both'"),
        # STEP and Lai are valid only within a horizon declared before the data
        (lambda: make_process("step", 1, alpha=0.05, alternative="two-sided", n_max=None),
         "`n_max` is required for method 'step'"),
        (lambda: run_test("lai", [0], [1], alpha=0.05), "`n_max` is required for method 'lai'"),
    ],
)
def test_validation_messages(call, match):
    with pytest.raises(StatsInputError, match=match):
        call()
