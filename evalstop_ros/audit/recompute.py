"""Step 4 of :mod:`.verify`: the statistics re-run from the folded trial book, as of each
published state, and every published status, decision and claim checked against them."""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from ..session.analysis import holm_options, interim_records

# The session's offline analysis on a trial book: the same rows as ``offline_decisions`` /
# ``offline_claims``, which take a journal path (the audit folds bags, and books as of each edit).
from ..session.offline import OfflineClaim, OfflineResult, book_decisions, claims_of
from ..session.trials import TrialBook, form_pairs, metric_value
from ..stats.engine import HolmEngine
from ..stats.registry import make_process
from ..stats.sequential import Decision, SequentialResult
from ..stats.step import StepProcess, step_uniforms
from .errors import AuditError
from .fold import _EDIT_KINDS, _Test
from .model import StatusRecord
from .protocol import ProtocolChecks
from .report import (
    MEAN_ATOL,
    StepReplay,
    _decision_name,
    _same,
    _trial_words,
    fmt,
)

__all__ = ["Recomputation"]

@dataclasses.dataclass(frozen=True)
class _Computed:
    """One test recomputed on a trial book.

    ``result`` is the session's offline analysis (:func:`~evalstop_ros.session.offline.offline_decisions`
    row): decision, stopping trial, count consumed.  ``trials_*``/``values_*`` are the pairs
    (AdaStop: each agent's scores, interim by interim) as far as a published state may have
    read them (``limit``), with the p-/e-value trajectories and running means after each.
    ``kind``: ``"paired"`` (a test's own stop), ``"holm"`` (a family decides; a test may be fed
    ahead of its family's analysis), ``"adastop"`` (``unit`` scores per agent per interim).
    """

    kind: str
    unit: int
    trials_a: tuple[int, ...]
    trials_b: tuple[int, ...]
    values_a: NDArray[np.float64]
    values_b: NDArray[np.float64]
    result: SequentialResult
    pvalues: NDArray[np.float64]
    evalues: NDArray[np.float64]
    means_a: NDArray[np.float64]  # running means after each pair (score per agent)
    means_b: NDArray[np.float64]
    fresh_p: float
    fresh_e: float
    limit: int

    def decisions(self, n: int, n_max: int) -> tuple[int, ...]:
        """The decisions a state with ``n`` pairs may carry (the first is the one to expect)."""
        res = self.result
        final = int(res.decision)
        if self.kind == "holm":  # decided at the family's step; CONTINUE until its analysis ran
            at = res.stopping_trial if res.stopping_trial is not None else n_max
            if final != Decision.CONTINUE and n == at:
                return (final, int(Decision.CONTINUE))
            return (int(Decision.CONTINUE),)
        if self.kind == "adastop":
            return (final,) if final != Decision.CONTINUE and n == res.n_observed else (int(Decision.CONTINUE),)
        stop = res.stopping_trial
        if stop is not None and n >= stop:
            return (final,)
        return (int(Decision.BUDGET_EXHAUSTED),) if n >= n_max else (int(Decision.CONTINUE),)

    def expected(self, n: int, n_max: int, published: int | None = None) -> dict[str, Any] | None:
        """What a state with ``n`` pairs should say, or ``None`` if the recomputation has no such state."""
        if n > self.limit or n % self.unit:
            return None
        allowed = self.decisions(n, n_max)
        decision = published if published in allowed else allowed[0]
        stop = self.result.stopping_trial if decision != Decision.CONTINUE else None
        out: dict[str, Any] = {"decision": decision, "stopping_trial": stop}
        if n == 0:
            return out | {"pvalue": self.fresh_p, "evalue": self.fresh_e, "mean_a": math.nan, "mean_b": math.nan}
        p = float(self.pvalues[n - 1]) if self.pvalues.size >= n else math.nan
        e = float(self.evalues[n - 1]) if self.evalues.size >= n else math.nan
        return out | {"pvalue": p, "evalue": e, "mean_a": float(self.means_a[n - 1]),
                      "mean_b": float(self.means_b[n - 1])}

class _Epoch(NamedTuple):
    """The recomputation of one trial book: every test, and the multi-task claims (non-pooled)."""

    tests: list[_Computed]
    claims: list[OfflineClaim]

def _differences(status: StatusRecord, expected: dict[str, Any]) -> list[str]:
    out = []
    if status.decision != expected["decision"]:
        out.append(f"decision published {_decision_name(status.decision)}, recomputed "
                   f"{_decision_name(expected['decision'])}")
    if status.stopping_trial != expected["stopping_trial"]:
        out.append(f"stopping trial published {status.stopping_trial}, recomputed {expected['stopping_trial']}")
    for key in ("pvalue", "evalue"):
        if not _same(getattr(status, key), expected[key]):
            out.append(f"{key} published {fmt(getattr(status, key))}, recomputed {fmt(expected[key])}")
    if status.origin != "decision event":  # decision events carry no means
        for key in ("mean_a", "mean_b"):
            if math.isnan(getattr(status, key)):
                continue  # withheld while the session runs (blinding: session/publishing.py)
            if not _same(getattr(status, key), expected[key], rtol=0.0, atol=MEAN_ATOL):
                out.append(f"{key} published {fmt(getattr(status, key))}, recomputed {fmt(expected[key])}")
    return out


# -- the verifier -------------------------------------------------------------------------------

class Recomputation(ProtocolChecks):
    """The recomputation of :mod:`.verify` (after the folding and the protocol checks)."""

    # .. 4. recomputation ...........................................................................
    def compute(self, book: TrialBook) -> _Epoch:
        """Every test on ``book``: the session's offline analysis, with the pairs it read."""
        rows: list[OfflineResult] = book_decisions(self.config, book)
        if len(rows) != len(self.tests):
            raise AuditError(f"{self.record.source}: the session's offline analysis gives {len(rows)} tests, the "
                             f"configuration {len(self.tests)}")
        out = []
        for index, (test, row) in enumerate(zip(self.tests, rows)):
            if (row.policy_a, row.policy_b, row.metric, row.task) != (
                    test.comparison.policy_a, test.comparison.policy_b, test.metric.name, test.task):
                raise AuditError(f"{self.record.source}: the session's offline analysis orders its tests differently "
                                 f"({row.policy_a} vs {row.policy_b}@{row.task} {row.metric} for {test.label})")
            if self.config.design == "adastop":
                out.append(self.compute_adastop(book, row.result, test))
            else:
                out.append(self.compute_paired(book, row.result, test, self.alphas[index]))
        claims = claims_of(self.config, rows) if self.config.claim != "pooled" else []
        return _Epoch(out, claims)

    def compute_paired(self, book: TrialBook, res: SequentialResult, test: _Test, alpha: float) -> _Computed:
        """A paired or independent test (own pair formation, for the trial ids of each pair)."""
        ci, mi, comparison, metric, task = test
        pairs = form_pairs(book, self.config.design, comparison.policy_a, comparison.policy_b, task or None)
        a, b = (np.array([metric_value(book.trials[t].score, metric.name)  # type: ignore[arg-type]
                          for t in trials], dtype=np.float64)
                for trials in ([p.trial_a for p in pairs], [p.trial_b for p in pairs]))
        seed, bins, n_max = self.plan.step_seed(ci, mi), metric.bins or 2, self.config.n_max
        if self.config.correction == "holm":
            # the family decides (res); a test's own p-/e-values run ahead of the family's analysis
            limit = min(a.size, n_max)
            m = len(self.config.comparison_list())
            trajectory = HolmEngine(m, holm_options(self.config, metric)).feed_all(0, a[:limit], b[:limit])
            fresh_p, fresh_e, pvalues, evalues = trajectory.fresh_p, trajectory.fresh_e, trajectory.pvalues, trajectory.evalues
            used = res.stopping_trial if res.decision in (Decision.A_BETTER, Decision.B_BETTER) else (
                n_max if res.decision == Decision.BUDGET_EXHAUSTED else limit)
            used = min(used or 0, limit)
            res = dataclasses.replace(res, n_observed=used, pvalues=np.array(pvalues[:used]),
                                      evalues=np.array(evalues[:used]))
            kind, p_traj, e_traj = "holm", np.array(pvalues), np.array(evalues)
        else:
            limit = res.n_observed
            fresh = make_process(metric.method, 1, alpha=alpha,
                                 alternative=metric.alternative, n_max=n_max, seed=seed, bins=bins)
            fresh_p, fresh_e = float(fresh.pvalue()[0]), float(fresh.evalue()[0])
            kind, p_traj, e_traj = "paired", res.pvalues, res.evalues
        counts = np.arange(1, limit + 1, dtype=np.float64)
        return _Computed(
            kind, 1, tuple(p.trial_a for p in pairs[:limit]), tuple(p.trial_b for p in pairs[:limit]), a[:limit],
            b[:limit], res, p_traj, e_traj, np.cumsum(a[:limit]) / counts, np.cumsum(b[:limit]) / counts,
            fresh_p, fresh_e, limit,
        )

    def compute_adastop(self, book: TrialBook, res: SequentialResult, test: _Test) -> _Computed:
        """An AdaStop comparison: each agent's first ``N`` scores of every interim it was analysed on."""
        assert self.config.adastop is not None
        unit = self.config.adastop.n_per_interim
        interims = res.n_observed // unit
        sides = []
        for policy in (test.comparison.policy_a, test.comparison.policy_b):
            trials: list[int] = []
            for interim in range(1, interims + 1):
                trials += [r.trial_id for r in interim_records(book, interim, policy, unit)]
            sides.append(trials)
        limit = min(len(sides[0]), len(sides[1]))
        a, b = (np.array([metric_value(book.trials[t].score, test.metric.name)  # type: ignore[arg-type]
                          for t in side[:limit]], dtype=np.float64) for side in sides)
        counts = np.arange(1, limit + 1, dtype=np.float64)
        empty = np.empty(0)
        return _Computed("adastop", unit, tuple(sides[0][:limit]), tuple(sides[1][:limit]), a, b, res, empty, empty,
                         np.cumsum(a) / counts, np.cumsum(b) / counts, math.nan, math.nan, limit)

    def check_statuses(self, final_book: TrialBook) -> tuple[list[_Computed], dict[int, int], dict[int, bool],
                                                               dict[int, StatusRecord]]:
        edits = [pos for e, pos in zip(self.events, self.positions) if e.kind in _EDIT_KINDS]
        computed: dict[int, _Epoch] = {len(edits): self.compute(final_book)}

        def epoch_of(epoch: int) -> _Epoch:
            if epoch not in computed:
                computed[epoch] = self.compute(self.fold(epoch))
            return computed[epoch]

        def at(epoch: int) -> list[_Computed]:
            return epoch_of(epoch).tests

        self.claims = computed[len(edits)].claims

        checked: dict[int, int] = defaultdict(int)
        reproduced = {i: True for i in range(len(self.tests))}
        last: dict[int, StatusRecord] = {}
        mismatches: dict[int, list[tuple[StatusRecord, list[str], int]]] = defaultdict(list)
        seen: set[tuple[Any, ...]] = set()
        statuses = sorted(self.record.statuses, key=lambda s: s.position)
        history: dict[tuple[int, int], dict[int, StatusRecord]] = defaultdict(dict)  # (test, epoch) -> n -> status
        for s in statuses:
            if s.task == "*" and self.config.claim != "pooled":
                checked[-1] += 1
                self.check_claim(s, epoch_of(bisect.bisect_left(edits, s.position)).claims)
                continue
            index = self.test_index.get((s.policy_a, s.policy_b, s.metric, s.task))
            if index is None:
                where = f" on task {s.task!r}" if s.task else ""
                self.violate("status_mismatch", [], f"{s.origin} reports comparison {s.policy_a} vs {s.policy_b} "
                             f"{s.metric}{where}, which the configuration does not define", s.position, s.stamp_ns,
                             data=False)
                continue
            last[index] = s
            epoch = bisect.bisect_left(edits, s.position)
            key = (index, epoch, s.n, s.decision, s.stopping_trial, repr(s.pvalue), repr(s.evalue), repr(s.mean_a),
                   repr(s.mean_b), s.origin == "decision event")  # repr: NaN equals NaN
            if key in seen:
                continue
            seen.add(key)
            checked[index] += 1
            if s.origin != "decision event":
                history[(index, epoch)].setdefault(s.n, s)
            problems = None
            for candidate in (epoch, epoch - 1, epoch + 1):  # tolerate cross-topic receive order
                if 0 <= candidate <= len(edits):
                    expected = at(candidate)[index].expected(s.n, self.config.n_max, s.decision)
                    diffs = ([f"{s.n} pairs published, the recomputation has no such state (it reads "
                              f"{at(candidate)[index].limit})"] if expected is None
                             else _differences(s, expected))
                    if not diffs:
                        problems = None
                        break
                    if problems is None:
                        problems = diffs
            if problems:
                reproduced[index] = False
                mismatches[index].append((s, problems, epoch))
        pinned: list[int] = []  # trials an earlier state named: they explain later mismatches on the same trials
        for index, found in sorted(mismatches.items(), key=lambda item: item[1][0][0].position):
            s, problems, epoch = found[0]
            culprits, why = self.culprits(index, s, epoch, at(epoch)[index], history, pinned)
            pinned.extend(culprits)
            more = f"; {len(found) - 1} later published state(s) of this comparison differ too" if len(found) > 1 else ""
            self.violate("status_mismatch", culprits, f"{self.label(index)}: {s.origin} at pair {s.n} not reproduced "
                         f"({'; '.join(problems)}){why}{more}", s.position, s.stamp_ns, data=False)
        checked.pop(-1, None)
        return at(len(edits)), dict(checked), reproduced, last

    def check_claim(self, s: StatusRecord, claims: Sequence[OfflineClaim]) -> None:
        """A multi-task claim row (``task`` ``"*"``) against ``offline_claims`` as of its time.

        A claim only grows, so a published directional claim must be established on the
        recomputation, and a published "no claim" (``BUDGET_EXHAUSTED``, final) must not be.
        """
        claim = next((c for c in claims if (c.policy_a, c.policy_b, c.metric) == (s.policy_a, s.policy_b, s.metric)),
                     None)
        name = f"{s.policy_a} vs {s.policy_b} {s.metric} ({self.config.claim} claim)"
        if claim is None:
            self.violate("status_mismatch", [], f"{s.origin} reports a claim on {name}, which the configuration does "
                         "not define", s.position, s.stamp_ns, data=False)
            return
        established = claim.result.established
        direction = Decision.B_BETTER if claim.result.alternative == "greater" else Decision.A_BETTER
        problem = None
        if s.decision in (Decision.A_BETTER, Decision.B_BETTER) and (not established or s.decision != direction):
            problem = (f"published {_decision_name(s.decision)}, recomputed "
                       f"{direction.name if established else 'not established'}")
        elif s.decision == Decision.BUDGET_EXHAUSTED and established:
            problem = f"published no claim (BUDGET_EXHAUSTED), recomputed {direction.name}"
        elif s.decision not in Decision._value2member_map_:
            problem = f"published decision code {s.decision}"
        if problem:
            earlier = sorted(t for t, pos in self.data_trials.items() if pos <= s.position)
            why = f"; explained by the finding(s) on {_trial_words(earlier)} above" if earlier else ""
            self.violate("status_mismatch", earlier, f"{name}: {s.origin} at {s.n} pairs not reproduced ({problem})"
                         f"{why}", s.position, s.stamp_ns, data=False)

    def culprits(self, index: int, s: StatusRecord, epoch: int, computed: _Computed,
                 history: dict[tuple[int, int], dict[int, StatusRecord]], pinned: Sequence[int] = ()
                 ) -> tuple[list[int], str]:
        """The trial(s) behind an unreproduced state, and a clause saying how they were found.

        ``pinned``: trials named by earlier mismatches of other comparisons; when nothing pins a
        trial of this one (its running means are withheld while the session runs), those of
        them it consumed explain it.
        """
        comparison = self.tests[index].comparison
        policies = {comparison.policy_a, comparison.policy_b}
        earlier = sorted(t for t, pos in self.data_trials.items() if pos <= s.position and self.policy_of(t) in
                         (*policies, ""))
        if earlier:
            return earlier, f"; explained by the finding(s) on {_trial_words(earlier)} above"
        n = s.n
        if not 1 <= n <= len(computed.trials_a):
            return [], ""
        trial_a, trial_b = computed.trials_a[n - 1], computed.trials_b[n - 1]
        known = history.get((index, epoch), {})
        before = known.get(n - 1)
        consumed = sorted(t for t in set(pinned) if t in (*computed.trials_a[:n], *computed.trials_b[:n]))
        explained = (consumed, f"; explained by the finding(s) on {_trial_words(consumed)} above") if consumed else None
        withheld = before is not None and (math.isnan(before.mean_a) or math.isnan(before.mean_b))
        if s.origin != "decision event" and n > 1 and withheld and math.isfinite(s.mean_a):
            return explained or ([], "; the per-policy means are published only at the end (blinding), so they do "
                                 "not pin a trial: check this comparison's scores")
        if s.origin != "decision event" and (before is not None or n == 1):
            named = []
            for side, trial, value in (("a", trial_a, computed.values_a[n - 1]), ("b", trial_b, computed.values_b[n - 1])):
                mean_now = getattr(s, f"mean_{side}")
                mean_before = 0.0 if n == 1 else getattr(before, f"mean_{side}")
                published = n * mean_now - (n - 1) * mean_before
                if math.isfinite(published) and abs(published - value) > 1e-6:
                    named.append(trial)
            if named:
                return named, (f"; the published means imply a different value for {_trial_words(named)} than "
                               "the recorded score")
        return explained or ([trial_a, trial_b], f"; pair {n} is trials {trial_a} and {trial_b}")

    def policy_of(self, trial_id: int) -> str:
        for event in self.events:
            if event.kind == "trial_requested" and event.trial_id == trial_id:
                return str(event.payload.get("policy_id", ""))
        return ""

    def label(self, index: int) -> str:
        return self.tests[index].label

    def step_replay(self, index: int, computed: _Computed) -> StepReplay:
        ci, mi, _, metric, _ = self.tests[index]
        seed = self.plan.step_seed(ci, mi)
        process = StepProcess(1, alpha=self.alphas[index], alternative=metric.alternative,
                              n_max=self.config.n_max, seed=seed)
        for n in range(1, computed.values_a.size + 1):
            process.update(computed.values_a[n - 1 : n], computed.values_b[n - 1 : n])
            if process.decision[0] != Decision.CONTINUE:
                gap = process.successes_b - process.successes_a
                low = np.minimum(process.successes_a, process.successes_b)
                weight = float(process.table.reject_weight(n, low, np.abs(gap))[0])
                draw = float(step_uniforms(seed, n, 1)[0])
                return StepReplay(seed, n, n, draw, weight)
        return StepReplay(seed, computed.values_a.size, None, None, None)
