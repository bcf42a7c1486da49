"""``evalstop simulate``: the installed console script against monte_carlo on the same settings."""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_ros.stats.registry import make_process
from evalstop_ros.stats.simulate import bernoulli, continuous_beta, monte_carlo, partial_credit


def core_summary(method: str, model, *, alpha: float, n_max: int, reps: int, seed: int, alternative="two-sided") -> dict:
    def factory(r: int, s: int):
        return make_process(method, r, alpha=alpha, alternative=alternative, n_max=n_max, seed=s)

    return monte_carlo(factory, model, reps=reps, n_max=n_max, rng=np.random.default_rng(seed)).to_dict()


@pytest.mark.parametrize(
    ("method", "dist_args", "model"),
    [
        ("nscore", ["--p0", "0.3", "--p1", "0.7"], bernoulli(0.3, 0.7)),
        ("step", ["--p0", "0.7", "--p1", "0.3"], bernoulli(0.7, 0.3)),  # A better: power counts A_BETTER
        ("nscore", ["--dist", "partial", "--levels", "0,0.5,1", "--probs-a", "0.5,0.3,0.2", "--probs-b", "0.2,0.3,0.5"],
         partial_credit([0, 0.5, 1], [0.5, 0.3, 0.2], [0.2, 0.3, 0.5])),
        ("wsr", ["--dist", "beta", "--mean-a", "0.4", "--mean-b", "0.6", "--concentration", "5"],
         continuous_beta(0.4, 0.6, 5.0)),
    ],
)
def test_json_equals_core(evalstop, method, dist_args, model, stdout_json):
    args = ["simulate", "--method", method, *dist_args, "--n-max", "40", "--alpha", "0.05", "--reps", "200", "--seed", "9", "--json"]
    payload = stdout_json(evalstop(*args))
    assert payload["summary"] == core_summary(method, model, alpha=0.05, n_max=40, reps=200, seed=9)
    assert payload["model"] == model.to_dict()
    assert payload["settings"]["method"] == method and payload["settings"]["seed"] == 9
    assert payload["summary"]["power"] > 0.5  # a real effect was simulated


def test_null_prints_no_power(evalstop_script, stdout_json):
    args = ["simulate", "--method", "nscore", "--p0", "0.5", "--p1", "0.5", "--n-max", "30", "--alpha", "0.05", "--reps", "100"]
    payload = stdout_json(evalstop_script(*args, "--json"))
    assert payload["summary"]["power"] is None and payload["summary"]["power_se"] is None
    proc = evalstop_script(*args)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[2].split()[:2] == ["power", "-"]
    assert "P(any claim (equal means))" in lines[3]


def test_human_summary(evalstop):
    args = ["simulate", "--method", "nscore", "--p0", "0.2", "--p1", "0.8", "--n-max", "50", "--alpha", "0.05", "--reps", "300"]
    expected = core_summary("nscore", bernoulli(0.2, 0.8), alpha=0.05, n_max=50, reps=300, seed=0)
    proc = evalstop(*args)
    assert proc.returncode == 0 and proc.stderr == ""  # stderr is not a terminal: no bar
    lines = proc.stdout.splitlines()
    assert lines[0] == "nscore (two-sided, alpha 0.05) on bernoulli(p0=0.2, p1=0.8)"
    assert lines[1] == "300 sequences of n_max = 50 trials, seed 0"
    assert lines[2].startswith(f"power    {expected['power']:.3f} ± {expected['power_se']:.3f}")
    assert lines[3].startswith(f"FPR      {expected['fpr']:.3f} ± {expected['fpr_se']:.3f}")
    assert lines[4].startswith(f"E[stop]  {expected['mean_ttd']:.1f} ± {expected['ttd_se']:.1f}")


def test_seeded_runs_repeat(evalstop):
    args = ["simulate", "--method", "savi", "--p0", "0.4", "--p1", "0.6", "--n-max", "30", "--alpha", "0.05", "--reps", "100", "--json"]
    first, again = evalstop(*args, "--seed", "3"), evalstop(*args, "--seed", "3")
    assert first.stdout == again.stdout
    assert evalstop(*args, "--seed", "4").stdout != first.stdout


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (["--p0", "0.5"], "--dist bernoulli needs --p1"),
        (["--p0", "0.5", "--p1", "0.6", "--mean-a", "0.3"], "--mean-a applies only to --dist beta"),
        (["--dist", "partial", "--levels", "0,1", "--probs-a", "0.5,0.5"], "--dist partial needs --probs-b"),
        (["--dist", "beta", "--mean-a", "0.3", "--mean-b", "0.4", "--concentration", "2", "--p1", "0.2"],
         "--p1 applies only to --dist bernoulli"),
        (["--p0", "1.5", "--p1", "0.5"], "`p0` must lie in [0, 1]; found 1.5"),
        (["--dist", "partial", "--levels", "0,1", "--probs-a", "0.5,0.6", "--probs-b", "0.5,0.5"], "`probs_a` must sum to 1"),
        (["--p0", "0.5", "--p1", "0.6", "--alpha", "1.5"], "`alpha` must lie in (0, 1); found 1.5"),
        (["--p0", "0.5", "--p1", "0.6", "--reps", "0"], "argument --reps: must lie in [1, 10000000]; found 0"),
    ],
)
def test_input_errors(evalstop, options, fragment, input_error):
    base = {"--method": "nscore", "--n-max": "20", "--alpha": "0.05", "--reps": "10"}
    for option in options[::2]:
        base.pop(option, None)
    args = [item for pair in base.items() for item in pair]
    input_error(evalstop("simulate", *args, *options), "simulate", fragment)


def test_malformed_list_is_a_usage_error(evalstop):
    proc = evalstop("simulate", "--method", "nscore", "--n-max", "20", "--alpha", "0.05", "--reps", "10",
                    "--dist", "partial", "--levels", "0,x", "--probs-a", "1,0", "--probs-b", "0,1")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "expected comma-separated numbers; found '0,x'" in proc.stderr


def test_progress_lines_say_each_tenth_with_the_time_left() -> None:
    """A log's progress: a line per tenth of the work done, with the time so far and left at that pace."""
    import io

    from evalstop_ros.cli._estimates import ProgressLines

    now = [0.0]
    out = io.StringIO()
    lines = ProgressLines("evalstop simulate", "pairs", out=out, clock=lambda: now[0])
    for done in range(0, 1001, 50):
        now[0] = done / 100  # 10 s in all
        lines(done, 1000)
    said = out.getvalue().splitlines()
    assert len(said) == 9, said  # 10 % .. 90 %; the end is the summary's
    assert said[0] == "evalstop simulate: 10% (100 of 1,000 pairs), 1 s, about 9 s left"
    assert said[-1] == "evalstop simulate: 90% (900 of 1,000 pairs), 9 s, about 1 s left"


def test_monte_carlo_reports_every_trial_of_every_chunk() -> None:
    """The progress callback of the simulation: monotone, in pairs, ending at reps x n_max (chunks
    whose sequences all decided early count as fed to n_max); the estimates do not change."""
    import numpy as np

    from evalstop_ros.stats.registry import make_process
    from evalstop_ros.stats.simulate import bernoulli, monte_carlo

    def run(progress: object) -> object:
        return monte_carlo(lambda r, s: make_process("nscore", r, alpha=0.05, alternative="two-sided", n_max=60, seed=s), bernoulli(0.1, 0.9),
                           reps=250, n_max=60, rng=np.random.default_rng(3), chunk=100, progress=progress)  # type: ignore[arg-type]

    seen: list[tuple[int, int]] = []
    summary = run(lambda done, total: seen.append((done, total)))
    assert summary == run(False)
    done = [d for d, _ in seen]
    assert all(t == 250 * 60 for _, t in seen) and done == sorted(done) and done[-1] == 250 * 60
    assert len(seen) > 3 * 3  # within chunks, not only at their ends
