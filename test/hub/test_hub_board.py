"""The live board is kept per result and read without holding up leases."""

from __future__ import annotations

import multiprocessing
import pathlib
import random
import threading
import time
from typing import Any

from hub_support import POLICIES, HubProcess, call, submit_simulated

from evalstop_ros.hub.leaderboard import EXACT_MODELS, Leaderboard, fitted_order, leaderboard, model_point
from evalstop_ros.hub.rankings import model_rows
from evalstop_ros.hub.store import open_store


def _results(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    policies = sorted(POLICIES)
    entries: list[dict[str, Any]] = [{"seq": i + 1, "at": float(i), "kind": "policy_added", "body": {"policy": p}}
                                      for i, p in enumerate(policies)]
    for k in range(n):
        a, b = rng.sample(policies, 2)
        entries.append({"seq": len(entries) + 1, "at": float(len(entries)), "kind": "result",
                        "body": {"assignment": f"a{k}", "upload_id": f"u{k}", "station": "s1", "policy_a": a,
                                 "policy_b": b, "task": rng.choice(["towel", "cup"]),
                                 "score_a": round(rng.random() * POLICIES[a], 2),
                                 "score_b": round(rng.random() * POLICIES[b], 2)}})
    return entries


def test_past_the_exact_range_models_are_fitted_at_model_points_live_and_offline_alike() -> None:
    """Beyond EXACT_MODELS results the models are refitted at steps of 5 %: a board fed a few
    results at a time, captured between feeds, equals the offline analysis, and its models are
    the fit of the first ``model_point(n)`` results."""
    entries = _results(EXACT_MODELS + 70, seed=3)
    policies = sorted(POLICIES)
    live = Leaderboard(policies, models=("bt", "paired"))
    rng = random.Random(4)
    fed, renders = 0, []
    while fed < len(entries):
        step = rng.randint(1, 40)
        live.add(entries[fed:fed + step])
        fed += step
        renders.append(live.capture())  # taken now, computed later (as a reader does)
    offline = leaderboard(policies, entries, models=("bt", "paired"))
    with multiprocessing.get_context("spawn").Pool(1) as workers:  # the hub fits large boards in a worker process
        live.fit_apart = lambda fit, *args: workers.apply(fit, args)
        assert renders[-1]() == offline
    n = offline["n_results"]
    assert offline["models_as_of"] == model_point(n) == EXACT_MODELS + EXACT_MODELS // 20 < n
    first = Leaderboard(policies, models=("bt",))
    first.add(entries[:len(policies) + model_point(n)])
    assert offline["models"]["bt"] == model_rows("bt", first._columns.first(model_point(n)), 0.95)
    # a capture taken earlier is the board as of then, whatever was fed after it
    early = renders[len(renders) // 2]()
    assert early == leaderboard(policies, entries[:len(policies) + early["n_results"]], models=("bt", "paired"))


def test_leases_are_not_held_up_by_a_board_read(tmp_path: pathlib.Path) -> None:
    """A board read that fits a slow model (the task model's 50 bootstrap refits, seconds) takes
    its snapshot outside the lock an ``uncertain`` lease takes: leases go on while it computes.
    (The board used to be computed under that lock: every lease waited for the read.)"""
    db = str(tmp_path / "hub.sqlite")
    viewer = submit_simulated(db, POLICIES, 300, ["towel", "cup"], "need", 5, lambda rng, p: round(rng.random() * p, 2))
    store = open_store(db)
    key = store.add_station("s2")
    store.close()
    hub = HubProcess(db, viewer, tmp_path, ["--models", "task", "--schedule", "uncertain"])
    hub.start()
    try:
        read: dict[str, Any] = {}

        def reader() -> None:
            start = time.monotonic()
            read["status"], read["board"] = call(hub.url + "/v1/leaderboard", key=viewer, timeout=600)
            read["seconds"] = time.monotonic() - start

        thread = threading.Thread(target=reader)
        thread.start()
        leases = []
        while thread.is_alive():
            start = time.monotonic()
            status, work = call(hub.url + "/v1/work", "POST", key=key, timeout=600)
            assert status == 200, work
            if thread.is_alive():  # this lease came back while the board was being computed
                leases.append(time.monotonic() - start)
        thread.join()
        assert read["status"] == 200 and read["board"]["models"]["task"]["rows"], read
        assert len(leases) >= 5, (leases, read["seconds"])
        assert max(leases) < read["seconds"] / 2, (leases, read["seconds"])
    finally:
        hub.stop()


def test_a_lease_takes_the_order_fitted_before_and_a_due_refit_is_fitted_apart() -> None:
    """The ``uncertain`` schedule's focus never fits the order (O(results)) when asked not to: the
    refit that is due is handed out as its data, fitted elsewhere and installed; the exact order
    (what a snapshot shows) fits it at once."""
    entries = _results(60, seed=8)
    policies = sorted(POLICIES)
    board = Leaderboard(policies, models=("bt",))
    board.add(entries[:len(policies) + 25])
    board.order()  # fitted on the first 21
    board.add(entries[len(policies) + 25:])
    due = board.order_due()
    assert due is not None and due[0] == 51 and len(due[1]) == 51
    before = board.focus(refit=False)
    assert board.order_due() is not None  # nothing was fitted for the lease
    board.install_order(due[0], fitted_order(due[1]))
    assert board.order_due() is None
    assert board.focus() == board.focus(refit=False) and board.snapshot() == leaderboard(policies, entries, models=("bt",))
    assert before.open == board.focus().open  # the open pairs never depend on the order
