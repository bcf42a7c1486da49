"""The leaderboard: pairwise tests from the statistics core, and the page in headless Chromium."""

from __future__ import annotations

import pathlib
import random
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest
from browser import WIDTHS, measure, screenshot
from hub_support import HubProcess, call, submit_simulated

from evalstop_ros.hub.designs import DECLARE_AFTER
from evalstop_ros.hub.errors import HubError
from evalstop_ros.hub.leaderboard import Leaderboard, leaderboard


def _entries(trials: list[tuple[str, str, float, float]]) -> list[dict[str, object]]:
    return [{"kind": "result", "body": {"policy_a": a, "policy_b": b, "task": "t", "score_a": sa, "score_b": sb}}
            for a, b, sa, sb in trials]


@pytest.mark.parametrize("seed", range(20))
def test_the_live_board_equals_the_offline_analysis_however_results_arrived(seed: int) -> None:
    """The hub's board is fed whatever the journal grew by since the last request and asked for
    its order at every lease; ``evalstop hub analyze`` feeds the whole export at once. Both must
    give the same board (its order used to be refitted whenever a request came, so the live
    board's order was fitted on other results than the offline one's: make demo-hub-ros printed
    MISMATCH)."""
    rng = random.Random(seed)
    strength = {"p1": 0.55, "p2": 0.5, "p3": 0.47, "p4": 0.45}
    policies = sorted(strength)
    entries: list[dict[str, Any]] = [{"seq": i + 1, "at": float(i), "kind": "policy_added", "body": {"policy": p}}
                                      for i, p in enumerate(policies)]
    for n in range(97):
        a, b = rng.sample(policies, 2)
        entries.append({"seq": len(entries) + 1, "at": float(len(entries)), "kind": "result",
                        "body": {"assignment": f"a{n}", "upload_id": f"u{n}", "station": "s1", "policy_a": a,
                                 "policy_b": b, "task": "towel", "score_a": float(rng.random() < strength[a]),
                                 "score_b": float(rng.random() < strength[b])}})
    live = Leaderboard(policies, models=("bt",))
    fed = 0
    while fed < len(entries):
        step = rng.randint(1, 9)
        live.add(entries[fed:fed + step])
        fed += step
        live.focus()  # a lease
    assert live.snapshot() == leaderboard(policies, entries, models=("bt",))


def test_the_board_refuses_tests_that_need_a_horizon_and_unknown_models() -> None:
    with pytest.raises(HubError, match="anytime-valid test without a horizon"):
        leaderboard(["a"], [], method="step")
    with pytest.raises(HubError, match="unknown ranker"):
        leaderboard(["a", "b"], [], ranker="glicko")
    with pytest.raises(HubError, match="unknown ranking model"):
        leaderboard(["a", "b"], [], models=("glicko",))


def _hub_with_results(tmp_path: pathlib.Path) -> tuple[str, str]:
    """A hub database with three policies and 45 results; (db, a viewer key)."""
    db = str(tmp_path / "hub.sqlite")
    viewer = submit_simulated(db, {"alpha": 0.9, "beta": 0.5, "gamma": 0.1}, 45, ["towel"], "need", 7,
                              lambda rng, p: float(rng.random() < p))
    return db, viewer


@pytest.mark.parametrize(("view", "width", "height"), WIDTHS)
def test_leaderboard_page_in_headless_chromium(chromium: Any, tmp_path: pathlib.Path, serve_directory: Any,
                                              view: str, width: int, height: int) -> None:
    db, viewer = _hub_with_results(tmp_path)
    hub = HubProcess(db, viewer, tmp_path, ["--public-leaderboard"])
    hub.start()
    try:
        board = call(hub.url + "/v1/leaderboard")[1]
        page = call(hub.url + "/leaderboard")[1]
        shot = screenshot(chromium, hub.url + "/leaderboard", f"leaderboard-{view}.png", width, 2400 if width < 760
                          else 1400, tmp_path / "profile-shot")
    finally:
        hub.stop()
    assert board["n_results"] == 45
    assert "<title>evalstop hub leaderboard</title>" in page
    shown = re.findall(r'<tr class="policy" data-policy="(\w+)" data-rank="(\d+)">', page)
    assert shown == [(row["policy"], str(row["rank"])) for row in board["ranking"]]
    assert len(re.findall(r'<tr class="pair"', page)) == 3
    assert "45 results counted" in page
    assert re.search(r"Computed at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC from 45 results\s+\(the last one: journal "
                     r"entry \d+, counted \d{4}-", page)
    assert "Family-wise error: all 3 pairs of the 3 policies (6 directional hypotheses) form one family" in page
    assert '<meta http-equiv="refresh" content="30">' in page and "reloads itself every 30 s" in page
    for table in re.findall(r"<thead><tr>(.*?)</tr></thead>", page, re.S):  # no two columns alike
        headers = re.findall(r"<th>(.*?)</th>", table)
        assert len(headers) == len(set(headers)), headers
    # one model table shown (the primary, bt), the others folded away until asked for
    assert re.findall(r'<details class="model" id="model-(\w+)" open>', page) == ["bt"]
    assert len(re.findall(r'<details class="model" id="model-\w+">', page)) == 5
    family = board["family"]
    assert {k: family[k] for k in ("procedure", "design", "pairs", "hypotheses", "alpha", "method", "warm_up",
                                   "analysis")} == {
        "procedure": "sequential weighted Holm", "design": "declared", "pairs": 3, "hypotheses": 6, "alpha": 0.05,
        "method": "mixture", "warm_up": DECLARE_AFTER, "analysis": "after every counted result, in journal order"}
    assert family["declared_at"] is not None and sorted(family["declared_order"]) == sorted(r["policy"] for r in board["ranking"])
    assert f"declared after result {family['declared_at']}" in page
    assert set(board["models"]) == {"paired", "bt", "davidson", "elo", "prog", "task"}
    for name, model in board["models"].items():  # every model: score, SE and interval, shown on the page
        assert f'id="model-{name}"' in page and len(model["rows"]) == 3
        for row in model["rows"]:
            assert row["se"] > 0 and row["low"] < row["score"] < row["high"]
            assert f"[{row['low']:.3f}, {row['high']:.3f}]" in page
    for row in board["ranking"]:  # intervals from stats.ranking, three decimals, around the rate
        assert row["win_low"] <= row["win_rate"] <= row["win_high"]
        assert f">{row['win_rate']:.3f} [{row['win_low']:.3f}, {row['win_high']:.3f}]<" in page
    # model score + win rate plots, a dot per policy each
    assert page.count('class="plot-dot"') == 6 and page.count('<figure class="ranking-plot"') == 2
    # the page as a browser lays it out at this width: no horizontal overflow
    root = tmp_path / "site"
    root.mkdir()
    (root / "leaderboard.html").write_text(page)
    result = measure(chromium, root, serve_directory(root), "leaderboard.html", width, height, tmp_path / "profile-dom")
    assert result["scrollWidth"] <= result["innerWidth"] and result["wide"] == [], result["wide"]
    assert "alpha" in result["text"] and "Pairs under sequential Holm" in result["text"]
    plots = _plot_layout(chromium, root, serve_directory(root), width, height, tmp_path / "profile-plot")
    assert plots["smallest_font_px"] >= 12, plots  # legible on a phone: the labels are text, not a scaled SVG
    assert plots["overlapping_ticks"] == 0 and plots["cut_labels"] == [], plots
    assert plots["track_px"] >= (150 if width < 760 else 600), plots
    from matplotlib import image

    pixels = image.imread(shot)[..., :3]
    assert pixels.shape[1] == width
    assert float((pixels.min(axis=2) < 0.5).mean()) > 0.005, "the page rendered blank"


def test_a_browser_signs_in_with_a_cookie(tmp_path: pathlib.Path) -> None:
    """Without --public-leaderboard: a sign-in form (401 HTML), an HttpOnly cookie, then the page;
    the JSON API keeps its header authentication."""
    db, viewer = _hub_with_results(tmp_path)
    hub = HubProcess(db, viewer, tmp_path)
    hub.start()
    try:
        status, form = call(hub.url + "/leaderboard")
        assert status == 401 and '<form class="login" method="post" action="/leaderboard/login">' in form
        assert call(hub.url + "/v1/leaderboard")[0] == 401  # JSON: header only, no form
        assert call(hub.url + "/leaderboard", key=viewer)[0] == 200  # a program with the header
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        wrong = urllib.request.Request(hub.url + "/leaderboard/login", data=b"key=esk_wrong", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            opener.open(wrong, timeout=10)
        with refused.value as answer:  # an HTTPError holds the response open
            assert answer.code == 401 and "that key was refused: unknown API key" in answer.read().decode()
        no_redirect = urllib.request.build_opener(_NoRedirect)
        login = urllib.request.Request(hub.url + "/leaderboard/login",
                                       data=urllib.parse.urlencode({"key": viewer}).encode(), method="POST")
        with pytest.raises(urllib.error.HTTPError) as moved:
            no_redirect.open(login, timeout=10)
        with moved.value as answer:
            assert answer.code == 303 and answer.headers["location"] == "/leaderboard"
            cookie = answer.headers["set-cookie"]
        assert cookie.startswith(f"evalstop_hub_key={viewer};") and "HttpOnly" in cookie
        assert "SameSite=strict" in cookie and "Path=/leaderboard" in cookie
        with opener.open(login, timeout=10) as page:  # follows the redirect with the cookie
            text = page.read().decode()
        assert page.status == 200 and "45 results counted" in text and 'data-policy="alpha"' in text
    finally:
        hub.stop()


_PLOT_HARNESS = """<!DOCTYPE html><html><body><pre id="result">pending</pre>
<iframe id="page" src="leaderboard.html" style="border:0" width="{width}" height="{height}"></iframe>
<script>
const frame = document.getElementById("page");
frame.addEventListener("load", () => {{
  const doc = frame.contentDocument, win = frame.contentWindow;
  const texts = Array.from(doc.querySelectorAll(".plot-label, .plot-tick, .plot-value, .ranking-plot figcaption"));
  const sizes = texts.map(el => parseFloat(win.getComputedStyle(el).fontSize));
  let overlapping = 0;
  for (const axis of doc.querySelectorAll(".plot-axis")) {{
    const boxes = Array.from(axis.querySelectorAll(".plot-tick")).map(el => el.getBoundingClientRect())
      .filter(box => box.width > 0);
    for (let k = 1; k < boxes.length; k++) if (boxes[k].left < boxes[k - 1].right) overlapping++;
  }}
  const cut = Array.from(doc.querySelectorAll(".plot-label")).filter(el => el.scrollWidth > el.clientWidth + 1)
    .map(el => el.textContent);
  const track = doc.querySelector(".plot-track").getBoundingClientRect().width;
  document.getElementById("result").textContent = JSON.stringify({{smallest_font_px: Math.min(...sizes),
    overlapping_ticks: overlapping, cut_labels: cut, track_px: track}});
}});
</script></body></html>
"""


def _plot_layout(chromium: Any, root: pathlib.Path, base_url: str, width: int, height: int,
                 profile: pathlib.Path) -> dict[str, Any]:
    """The ranking plots as Chromium lays them out in a ``width`` px frame: the smallest font of
    their text, tick labels that overlap, policy names cut short, the width of a plot's track."""
    import html
    import json

    (root / "plot-harness.html").write_text(_PLOT_HARNESS.format(width=width, height=height), encoding="utf-8")
    done = chromium(profile, "--virtual-time-budget=20000", "--dump-dom", f"{base_url}/plot-harness.html")
    found = re.search(r'<pre id="result">(.*?)</pre>', done.stdout, re.S)
    assert found and found.group(1) != "pending", done.stdout[-2000:] + done.stderr[-2000:]
    result: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return result


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None
