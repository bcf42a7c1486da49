"""The leaderboard: pairwise tests from the statistics core, and the page in headless Chromium."""

from __future__ import annotations

import pathlib
import random
import re
from typing import Any

import pytest
from hub_support import HubProcess, call

from evalstop_ros.hub.errors import HubError
from evalstop_ros.hub.leaderboard import leaderboard
from evalstop_ros.hub.store import open_store
from evalstop_ros.stats.registry import run_test


def _entries(trials: list[tuple[str, str, float, float]]) -> list[dict[str, object]]:
    return [{"kind": "result", "body": {"policy_a": a, "policy_b": b, "task": "t", "score_a": sa, "score_b": sb}}
            for a, b, sa, sb in trials]


def test_pair_test_is_the_core_test_on_oriented_pairs() -> None:
    rng = random.Random(5)
    trials = []
    for _ in range(60):
        x, y = float(rng.random() < 0.9), float(rng.random() < 0.3)
        trials.append(("good", "bad", x, y) if rng.random() < 0.5 else ("bad", "good", y, x))
    board = leaderboard(["bad", "good"], _entries(trials))
    xs = [t[3] if t[0] == "good" else t[2] for t in trials]  # oriented (bad, good) by name
    ys = [t[2] if t[0] == "good" else t[3] for t in trials]
    core = run_test("nscore", xs, ys, alpha=0.05)
    (pair,) = board["pairs"]
    assert (pair["policy_a"], pair["policy_b"], pair["n"]) == ("bad", "good", 60)
    assert pair["decision"] == core.decision.name.lower() == "b_better" and pair["better"] == "good"
    assert pair["stopping_trial"] == core.stopping_trial
    assert [row["policy"] for row in board["ranking"]] == ["good", "bad"]
    bt = leaderboard(["bad", "good"], _entries(trials), ranker="bt")["ranking"]
    assert [row["policy"] for row in bt] == ["good", "bad"] and bt[0]["bt_score"] > bt[1]["bt_score"]
    with pytest.raises(HubError, match="anytime-valid test without a horizon"):
        leaderboard(["a"], [], method="step")


def test_leaderboard_page_in_headless_chromium(chromium: Any, tmp_path: pathlib.Path) -> None:
    db = str(tmp_path / "hub.sqlite")
    store = open_store(db)
    success = {"alpha": 0.9, "beta": 0.5, "gamma": 0.1}
    for name, p in success.items():
        store.add_policy(name, f"sim://success={p}")
    store.add_station("s1")
    rng = random.Random(7)
    for i in range(45):
        work, _ = store.lease("s1", 60.0, ["towel"], "need", rng)
        scores = [float(rng.random() < success[p]) for p in (work.policy_a, work.policy_b)]
        store.submit("s1", work.assignment_id, f"upload-{i:05d}", *scores)
    viewer = store.add_station("viewer", "viewer")
    store.close()
    hub = HubProcess(db, viewer, tmp_path, ["--public-leaderboard"])
    hub.start()
    try:
        board = call(hub.url + "/v1/leaderboard")[1]
        dom = chromium(tmp_path / "profile-dom", "--virtual-time-budget=5000", "--dump-dom",
                        hub.url + "/leaderboard")
        shot = tmp_path / "board.png"
        chromium(tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1000,800",
                  hub.url + "/leaderboard")
    finally:
        hub.stop()
    assert board["n_results"] == 45
    assert "<title>evalstop hub leaderboard</title>" in dom.stdout, dom.stderr[-2000:]
    shown = re.findall(r'<tr class="policy" data-policy="(\w+)" data-rank="(\d+)">', dom.stdout)
    assert shown == [(row["policy"], str(row["rank"])) for row in board["ranking"]]
    assert len(re.findall(r'<tr class="pair"', dom.stdout)) == 3
    assert "45 results counted" in dom.stdout
    from matplotlib import image

    pixels = image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (800, 1000)
    assert float((pixels.min(axis=2) < 0.5).mean()) > 0.005, "the page rendered blank"
