"""Jinja2 rendering of the report's and the hub's pages (templates in ``templates/``, autoescaped)."""

from __future__ import annotations

import datetime
import functools
import math
from typing import Any

import jinja2

__all__ = ["num", "render", "utc"]


def num(value: Any, digits: int = 3) -> str:
    """A number as the pages print it: ``digits`` decimals always (``0.990``, not ``0.99``),
    small p-values in scientific notation, ``-`` for none or NaN; integers and text unchanged."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, bool) or isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}" if value == 0 or abs(value) >= 10 ** -digits else f"{value:.2e}"
    return str(value)


def utc(stamp: int | float | datetime.datetime | None) -> str:
    """A time stamp (ns since the epoch, s since the epoch, or a datetime) as ``YYYY-MM-DD HH:MM:SS UTC``."""
    if stamp is None:
        return "-"
    if isinstance(stamp, datetime.datetime):
        when = stamp.astimezone(datetime.UTC)
    else:
        seconds = stamp / 1e9 if stamp > 1e12 else float(stamp)
        when = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("evalstop_ros.report", "templates"),
                             autoescape=jinja2.select_autoescape(("html", "j2")), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = num
    env.filters["utc"] = utc
    return env


def render(template: str, **context: Any) -> str:
    """Render ``templates/<template>`` with ``context``."""
    return _environment().get_template(template).render(**context)
