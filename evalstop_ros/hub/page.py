"""The leaderboard as a self-contained HTML page (no scripts, no external resources)."""

from __future__ import annotations

import html
from typing import Any


def _cell(value: Any, digits: int = 3) -> str:
    if value is None:
        return "&ndash;"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return html.escape(str(value))


def render_page(board: dict[str, Any], title: str = "evalstop hub leaderboard") -> str:
    """HTML of :func:`~.leaderboard.leaderboard`'s result."""
    ranking = "\n".join(
        f'<tr class="policy" data-policy="{html.escape(r["policy"])}" data-rank="{r["rank"]}">'
        f'<td>{r["rank"]}</td><td>{_cell(r["policy"])}</td><td>{r["trials"]}</td>'
        f'<td>{_cell(r["win_rate"])}</td><td>{_cell(r["mean_score"])}</td></tr>' for r in board["ranking"])
    pairs = "\n".join(
        f'<tr class="pair" data-decision="{p["decision"]}"><td>{_cell(p["policy_a"])} vs {_cell(p["policy_b"])}</td>'
        f'<td>{p["n"]}</td><td>{_cell(p["mean_a"])}</td><td>{_cell(p["mean_b"])}</td>'
        f'<td>{_cell(p["decision"])}</td><td>{_cell(p["better"])}</td><td>{_cell(p["pvalue"])}</td></tr>'
        for p in board["pairs"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin-bottom: 2em; }}
th, td {{ border: 1px solid #bbb; padding: 0.3em 0.8em; text-align: left; }}
th {{ background: #eee; }}
</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p id="summary">{board["n_results"]} results counted; ranking: {html.escape(board["ranker"])};
pairwise test: {html.escape(board["method"])} at alpha {board["alpha"]:g} (anytime-valid, read after every result).</p>
<h2>Ranking</h2>
<table id="ranking"><thead><tr><th>rank</th><th>policy</th><th>trials</th><th>win rate</th><th>mean score</th></tr></thead>
<tbody>
{ranking}
</tbody></table>
<h2>Pairwise sequential tests</h2>
<table id="pairs"><thead><tr><th>pair</th><th>n</th><th>mean A</th><th>mean B</th><th>decision</th><th>better</th><th>p-value</th></tr></thead>
<tbody>
{pairs}
</tbody></table>
</body></html>
"""
