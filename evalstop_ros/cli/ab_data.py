"""Reading A/B comparisons for ``evalstop rank``: a CSV file, a hub export, a session journal or a rosbag (seed 001 Sec. 3.1).

The CSV columns are in docs/cli.md; every error names the file, the line and the value.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib

from ..hub.export import is_hub_export
from ..stats.ranking import PREFERENCES, Comparisons, comparisons
from ._common import CliError, read_csv_rows
from .data import parse_number

REQUIRED = ("policy_a", "policy_b", "preference", "progress_a", "progress_b")
TRUE = frozenset({"1", "true", "yes", "y"})
FALSE = frozenset({"0", "false", "no", "n"})


@dataclasses.dataclass(frozen=True)
class ABTable:
    """The valid comparisons of a file, their explanations, and how many rows were set aside."""

    path: str
    data: Comparisons
    n_invalid: int
    explanations: tuple[str, ...]
    #: How the data were read, where a reader should know (e.g. preferences derived from scores).
    note: str = ""

    def notes_by_policy(self) -> dict[str, list[str]]:
        """The non-empty explanations grouped per policy (each goes to both policies of its pair)."""
        notes: dict[str, list[str]] = {name: [] for name in self.data.policies}
        for n, text in enumerate(self.explanations):
            if text:
                for k in (self.data.i[n], self.data.j[n]):
                    notes[self.data.policies[int(k)]].append(text)
        return notes


def load_ab(path: str) -> ABTable:
    """A/B comparisons from a CSV file, a hub export, a session journal or a rosbag (module docstring)."""
    source = pathlib.Path(path)
    if source.suffix.lower() == ".jsonl" or is_hub_export(source):
        return load_hub_export(path)
    if source.suffix.lower() == ".csv" or (source.is_file() and source.suffix.lower() not in (".db", ".mcap", ".db3")):
        return load_ab_csv(path)
    return _load_session(path)


def load_hub_export(path: str) -> ABTable:
    """The results of a hub's journal export (``evalstop hub export``: JSON lines ``{seq, at, kind,
    body}``), as the hub's leaderboard reads them (:func:`evalstop_ros.hub.rankings.comparisons_of`):
    arm A's and arm B's policy, the higher score preferred (equal: a tie), both scores as progress,
    the result's task.  Policies registered without a result are left out (they have no data)."""
    from ..hub.errors import HubError
    from ..hub.export import read_export
    from ..hub.leaderboard import trials_of
    from ..hub.rankings import comparisons_of

    try:
        entries = read_export(path)
    except HubError as err:
        raise CliError(str(err)) from err
    try:
        trials = trials_of(entries)
    except (KeyError, TypeError, ValueError) as err:
        raise CliError(f"{path}: a result entry lacks a field or has a bad value ({err})") from err
    if not trials:
        raise CliError(f"{path}: the hub export holds no result")
    policies = sorted({t.policy_a for t in trials} | {t.policy_b for t in trials})
    return ABTable(path, comparisons_of(policies, trials), 0, ("",) * len(trials))


def _load_session(path: str) -> ABTable:
    try:
        from ..audit import AuditError
        from ..audit.bag import is_bag, read_bag
        from ..audit.journal import read_journal_record
    except ImportError as err:
        raise CliError(f"reading a session needs rosbags ({err}); pip install 'evalstop[audit]'") from err
    from ..session.ab import ab_rounds
    from ..session.blinding import revealed_key, unseal
    from ..session.config import ConfigError, parse_config
    from ..session.errors import SessionError

    try:
        record = read_bag(path) if is_bag(path) else read_journal_record(path)
    except AuditError as err:
        raise CliError(str(err)) from err
    if not record.configs:
        raise CliError(f"{path}: the session has no configuration")
    try:
        config = parse_config(json.loads(record.configs[-1].config_json))
        events = list(record.events)
        if any(e.payload.get("sealed") for e in events if e.kind == "trial_requested"):
            # a recording: the policies behind the labels come back with the key revealed at the end
            key, problem = revealed_key(events, record.session_id)
            if key is None:
                raise CliError(f"{path}: cannot tell which policy ran which trial: {problem}")
            events = unseal(events, config, key, record.session_id)
        rounds = ab_rounds(config, events)
    except (ConfigError, SessionError, ValueError) as err:
        raise CliError(f"{path}: {err}") from err
    if len(rounds.data) == 0:
        raise CliError(f"{path}: no complete A/B round ({rounds.n_incomplete} incomplete, {rounds.n_invalid} invalid): "
                       "a round counts once both its trials are scored and the operator stated a preference "
                       "(scoring: auto derives it from the two scores)")
    note = (f"{rounds.n_derived} of {len(rounds.data)} rounds: no preference recorded (scoring: auto); the higher "
            "progress, then success, is preferred, equal scores tie" if rounds.n_derived else "")
    return ABTable(path, rounds.data, rounds.n_incomplete, rounds.explanations, note)


def load_ab_csv(path: str) -> ABTable:
    """Read the A/B comparisons of ``path``; raises :class:`CliError` on any malformed row."""
    rows = read_csv_rows(path)
    header = [name.strip() for name in rows[0][1]]
    missing = [name for name in REQUIRED if name not in header]
    if missing:
        raise CliError(f"{path} line {rows[0][0]}: the header lacks {', '.join(missing)}; expected {','.join(REQUIRED)}[,task][,valid]")
    columns: dict[str, list[str]] = {name: [] for name in (*REQUIRED, "task", "explanation")}
    progress: dict[str, list[float]] = {"progress_a": [], "progress_b": []}
    n_invalid = 0
    for line, row in rows[1:]:
        if len(row) != len(header):
            raise CliError(f"{path} line {line}: expected {len(header)} fields like the header; found {len(row)}")
        fields = {name: cell.strip() for name, cell in zip(header, row, strict=True)}
        if not _valid(fields.get("valid", "1"), f"{path} line {line}, column 'valid'"):
            n_invalid += 1
            continue
        preference = {key.lower(): key for key in PREFERENCES}.get(fields["preference"].lower())
        if preference is None:
            raise CliError(f"{path} line {line}: preference must be A, B or tie; found {fields['preference']!r}")
        if not fields["policy_a"] or not fields["policy_b"]:
            raise CliError(f"{path} line {line}: policy_a and policy_b must not be empty")
        if fields["policy_a"] == fields["policy_b"]:
            raise CliError(f"{path} line {line}: policy {fields['policy_a']!r} is compared with itself")
        for name in ("policy_a", "policy_b"):
            columns[name].append(fields[name])
        columns["preference"].append(preference)
        columns["task"].append(fields.get("task", ""))
        columns["explanation"].append(fields.get("explanation", ""))
        for name in progress:
            progress[name].append(_progress(fields[name], f"{path} line {line}, column {name!r}"))
    if not columns["preference"]:
        raise CliError(f"{path}: no valid comparisons ({n_invalid} rows marked invalid)")
    data = comparisons(
        columns["policy_a"], columns["policy_b"], columns["preference"],
        progress_a=progress["progress_a"], progress_b=progress["progress_b"], tasks=columns["task"],
    )
    return ABTable(path, data, n_invalid, tuple(columns["explanation"]))


def _valid(cell: str, where: str) -> bool:
    value = cell.lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise CliError(f"{where}: expected 1/0 (true/false, yes/no); found {cell!r}")


def _progress(cell: str, where: str) -> float:
    if not cell:
        return math.nan
    value = parse_number(cell, where)
    if not 0.0 <= value <= 100.0:
        raise CliError(f"{where}: progress must lie in [0, 100]; found {cell!r}")
    return value / 100.0
