"""The surrogate (seed 004 §IV-A) and its embeddings (§V-A, App. E)."""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_ros.active import ActiveError, Surrogate, leading_verb, policy_embeddings, task_embeddings
from evalstop_ros.active.embeddings import sentence_vectors


def _data(rng: np.random.Generator, truth: np.ndarray, reps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    grid = np.indices(truth.shape).reshape(2, -1).repeat(reps, axis=1)
    return grid[0], grid[1], (rng.random(grid.shape[1]) < truth[grid[0], grid[1]]).astype(float)


def test_binary_head_learns_the_success_rates() -> None:
    rng = np.random.default_rng(0)
    truth = np.array([[0.1, 0.9, 0.5], [0.8, 0.2, 0.5]])
    model = Surrogate(policy_embeddings(2), task_embeddings(["a", "b", "c"], "random"), epochs=300, lr=1e-2)
    prior = np.abs(model.mean() - truth).mean()
    model.fit(*_data(rng, truth, 60))
    error = np.abs(model.mean() - truth).mean()
    assert error < 0.08 < prior, (prior, error)


def test_binned_head_learns_a_bimodal_progress() -> None:
    rng = np.random.default_rng(1)
    n = 400
    progress = np.where(rng.random(n) < 0.5, 0.02, 0.9)
    model = Surrogate(policy_embeddings(1), task_embeddings(["a"], "random"), outcome="binned", epochs=300, lr=1e-2)
    model.fit(np.zeros(n, dtype=int), np.zeros(n, dtype=int), progress)
    q = model.predict()[0, 0, 0]
    assert q.shape == (25,)
    assert q[0] + q[22] > 0.9  # the two modes' bins
    assert model.mean()[0, 0] == pytest.approx(0.5 * (0.5 / 25) + 0.5 * (22.5 / 25), abs=0.05)
    assert model.log_likelihood(np.zeros(2, dtype=int), np.zeros(2, dtype=int), [0.02, 0.9]) > np.log(0.4 * 25)


def test_fits_are_reproducible_and_mc_dropout_varies() -> None:
    rng = np.random.default_rng(2)
    truth = np.array([[0.3, 0.7]])
    data = _data(rng, truth, 10)
    first = Surrogate(policy_embeddings(1), task_embeddings(["a", "b"], "random"), epochs=20, seed=5)
    second = Surrogate(policy_embeddings(1), task_embeddings(["a", "b"], "random"), epochs=20, seed=5)
    first.fit(*data)
    second.fit(*data)
    assert np.array_equal(first.predict(samples=4, seed=1), second.predict(samples=4, seed=1))
    samples = first.predict(samples=10, seed=1)
    assert samples.shape == (10, 1, 2, 2) and samples[:, 0, 0, 1].std() > 0  # dropout on
    assert np.array_equal(first.predict(), first.predict())  # eval mode: deterministic


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"outcome": "gaussian"}, "`outcome` should be one of"),
    ({"dropout": 1.0}, "`dropout` must lie in"),
    ({"epochs": 0}, "`epochs` must be a positive integer"),
])
def test_bad_settings_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ActiveError, match=message):
        Surrogate(np.zeros((1, 2)), np.zeros((1, 2)), **kwargs)  # type: ignore[arg-type]


def test_bad_data_is_refused() -> None:
    model = Surrogate(np.zeros((1, 2)), np.zeros((2, 2)))
    with pytest.raises(ActiveError, match="must be 0 or 1"):
        model.fit([0], [0], [0.5])
    with pytest.raises(ActiveError, match=r"task indices in \[0, 2\)"):
        model.fit([0], [2], [1.0])
    with pytest.raises(ActiveError, match=r"`outcomes` must lie in \[0, 1\]"):
        model.fit([0], [0], [1.5])


@pytest.mark.parametrize(("instruction", "verb"), [
    ("Pick up the red cube and place it in the bowl.", "pick up"),
    ("Please open the top drawer", "open"),
    ("turn off the lamp", "turn off"),
    ("window-close", "close"),
])
def test_leading_verb(instruction: str, verb: str) -> None:
    assert leading_verb(instruction) == verb


def test_bundled_sentence_model_loads_offline_and_groups_verbs() -> None:
    # Seed 004 P4-style check: MiniLM puts "open the drawer" nearer "close the drawer" than
    # "open the window"; the verb embedding reverses that (the point of §V-A).
    texts = ["open the drawer", "close the drawer", "open the window"]
    vectors = sentence_vectors(texts)
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    cos = vectors @ vectors.T
    assert cos[0, 1] > cos[0, 2]
    verb = task_embeddings(texts * 4, "verb", dim=8, seed=0)[:3]
    language = task_embeddings(texts * 4, "language", dim=8)[:3]
    assert verb.shape == language.shape == (3, 8)
    d = lambda e, i, j: float(np.linalg.norm(e[i] - e[j]))  # noqa: E731
    assert d(verb, 0, 2) < d(verb, 0, 1)  # same verb closer
    assert d(language, 0, 1) < d(language, 0, 2)  # same object closer


def test_pca_pads_when_there_are_fewer_tasks_than_dims() -> None:
    emb = task_embeddings(["open the drawer", "push the button", "lift the cube"], "language", dim=32)
    assert emb.shape == (3, 32) and np.all(emb[:, 3:] == 0)
    with pytest.raises(ActiveError, match="`kind` should be one of"):
        task_embeddings(["a"], "optimal")
