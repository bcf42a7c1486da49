"""Reading a session configuration: the YAML file, a launch's overrides, one-line validation
messages and the differences between two configurations (:func:`~.config.load_config` puts
them together; the journal names what changed with :func:`config_diff`).
"""

from __future__ import annotations

import difflib
import pathlib
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import yaml  # type: ignore[import-untyped, unused-ignore]
from pydantic import BaseModel, ValidationError

from .errors import ConfigError

__all__ = ["apply_overrides", "config_diff", "format_validation_error", "read_config_file"]


def _location(loc: Sequence[int | str]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _model_at(loc: Sequence[int | str], root: type[BaseModel]) -> type[BaseModel] | None:
    """The model class that holds the keys at ``loc`` (for "did you mean" hints)."""
    model: type[BaseModel] | None = root
    for part in loc:
        if isinstance(part, int):
            continue
        if model is None or part not in model.model_fields:
            return None
        annotation = model.model_fields[part].annotation
        model = None
        for candidate in (annotation, *typing.get_args(annotation)):
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                model = candidate
    return model


def _describe(error: Mapping[str, Any], root: type[BaseModel]) -> str:
    loc = tuple(error["loc"])
    if error["type"] == "string_pattern_mismatch":
        return f"{_location(loc)}: must be an identifier (letters, digits and _ . : / -); found {error['input']!r}"
    if error["type"] == "extra_forbidden":
        key = str(loc[-1])
        where = _location(loc[:-1]) or "config"
        model = _model_at(loc[:-1], root)
        hint = difflib.get_close_matches(key, list(model.model_fields), n=1) if model else []
        return f"{where}: unknown key {key!r}" + (f" (did you mean {hint[0]!r}?)" if hint else "")
    where = _location(loc)
    if error["type"] == "missing":
        return f"{where}: required key is missing"
    message = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if error["type"] != "value_error" and "input" in error and not isinstance(error["input"], (dict, list)):
        message += f"; found {error['input']!r}"
    return f"{where}: {message}" if where else message


def format_validation_error(err: ValidationError, root: type[BaseModel]) -> str:
    """One ``location: problem`` clause per error of validating ``root``, joined by ``"; "``."""
    errors = err.errors()
    # A list whose item failed is also reported "too short" (pydantic counts valid items only):
    # keep the item's error, drop that echo.
    failed = [tuple(e["loc"]) for e in errors]
    kept = [
        e for e in errors
        if not (e["type"] == "too_short" and any(len(f) > len(e["loc"]) and f[: len(e["loc"])] == tuple(e["loc"]) for f in failed))
    ]
    return "; ".join(_describe(e, root) for e in kept)


def apply_overrides(data: object, *, alpha: float | None = None, n_max: int | None = None,
                    method: str | None = None, confirm_reset: bool | None = None,
                    max_attempts: int | None = None, runners: Sequence[str] | None = None) -> object:
    """A parsed configuration with the pre-registration overrides of a launch applied.

    ``alpha`` replaces the session's level (and drops per-metric levels, which would otherwise
    win), ``n_max`` the trial budget, ``method`` every metric's method (with the default metrics
    when the configuration names none), ``confirm_reset`` the operator's reset confirmations,
    ``runners`` the runner actions serving the session at once (``runner.runners``).
    ``None`` keeps the configuration's value.  Anything that
    is not a mapping is returned unchanged, for :func:`parse_config` to refuse.

    >>> apply_overrides({"alpha": 0.1, "metrics": [{"name": "success", "alpha": 0.05}]}, alpha=0.2)
    {'alpha': 0.2, 'metrics': [{'name': 'success'}]}
    >>> apply_overrides({"metrics": [{"name": "success"}]}, method="savi", n_max=40)
    {'metrics': [{'name': 'success', 'method': 'savi'}], 'n_max': 40}
    >>> apply_overrides({"seed": 1}, confirm_reset=True)
    {'seed': 1, 'confirm_reset': True}
    >>> apply_overrides({"runner": {"max_attempts": 2}}, max_attempts=5), apply_overrides({}, max_attempts=5)
    ({'runner': {'max_attempts': 2}}, {'runner': {'max_attempts': 5}})
    >>> apply_overrides({"runner": {"timeout_s": 30}}, runners=["arm_1/run_trial", "arm_2/run_trial"])
    {'runner': {'timeout_s': 30, 'runners': ['arm_1/run_trial', 'arm_2/run_trial']}}
    """
    if not isinstance(data, Mapping):
        return data
    result = dict(data)
    if alpha is not None:
        result["alpha"] = alpha
        result["metrics"] = [{k: v for k, v in m.items() if k != "alpha"} if isinstance(m, Mapping) else m
                             for m in result.get("metrics") or []]
        if not result["metrics"]:
            del result["metrics"]
    if n_max is not None:
        result["n_max"] = n_max
    if method is not None:
        metrics = result.get("metrics") or [{"name": "success"}, {"name": "progress"}]
        result["metrics"] = [{**m, "method": method} if isinstance(m, Mapping) else m for m in metrics]
    if confirm_reset is not None:
        result["confirm_reset"] = confirm_reset
    runner = result.get("runner", {})
    if runners is not None and isinstance(runner, Mapping):
        result["runner"] = runner = {**runner, "runners": list(runners)}
    if max_attempts is not None and isinstance(runner, Mapping) and "max_attempts" not in runner:
        result["runner"] = {**runner, "max_attempts": max_attempts}
    return result


def read_config_file(path: str | pathlib.Path) -> object:
    """The parsed YAML of a configuration file (not validated).

    Raises
    ------
    ConfigError
        If the file cannot be read or is not YAML.
    """
    source = str(path)
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(source, f"cannot read the file: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise ConfigError(source, f"not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}): "
                          "save the configuration as UTF-8") from err
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(source, f"not valid YAML: {err}") from err

def config_diff(old: object, new: object, where: str = "") -> list[str]:
    """Human-readable differences between two JSON-like configurations.

    Examples
    --------
    >>> config_diff({"alpha": 0.05, "metrics": [{"method": "step"}]},
    ...             {"alpha": 0.1, "metrics": [{"method": "nscore"}]})
    ['alpha: 0.05 -> 0.1', "metrics[0].method: 'step' -> 'nscore'"]
    """
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        changes: list[str] = []
        for key in sorted(set(old) | set(new)):
            here = f"{where}.{key}" if where else str(key)
            if key not in old:
                changes.append(f"{here}: added {new[key]!r}")
            elif key not in new:
                changes.append(f"{here}: removed (was {old[key]!r})")
            else:
                changes.extend(config_diff(old[key], new[key], here))
        return changes
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [c for i, (a, b) in enumerate(zip(old, new)) for c in config_diff(a, b, f"{where}[{i}]")]
    return [] if old == new else [f"{where or 'config'}: {old!r} -> {new!r}"]
