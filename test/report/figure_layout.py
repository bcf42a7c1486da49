"""Layout checks of a drawn matplotlib figure: text inside the figure, no overlaps.

Every check draws the figure at its own resolution (the Agg renderer, as ``savefig`` does) and
compares window extents in display pixels, with a tolerance of :data:`SLACK` pixel.

* :func:`clipped_texts`: every visible, non-empty text artist (titles, labels, tick labels,
  annotations, legend entries) lies inside the figure's bounding box;
* :func:`overlaps`: per axes, the legend, the annotation texts and the data do not overlap: no
  two annotations intersect, no annotation or legend covers a data point (line vertices and
  scatter points inside the axes), a legend covers no annotation; a figure-level legend
  intersects no axes and no other text; tick labels of an axis do not run into each other.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from evalstop_ros.report.style import PRINT_DPI

SLACK = 1.0


def _texts(fig: Figure) -> list[Text]:
    """Every text the figure draws: not hidden, not empty, and for tick labels only the ticks
    inside the view (matplotlib keeps labels of ticks beyond the limits but does not draw them)."""
    ticks: set[int] = set()
    drawn: set[int] = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                ticks.update((id(tick.label1), id(tick.label2)))
            for tick in axis._update_ticks():
                drawn.update((id(tick.label1), id(tick.label2)))
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()
            and all(a.get_visible() for a in _ancestors(t)) and (id(t) not in ticks or id(t) in drawn)]


def _ancestors(artist: object) -> Iterable[object]:
    axes = getattr(artist, "axes", None)
    return [axes] if axes is not None else []


def _draw(fig: Figure) -> object:
    """Draw ``fig`` with Agg at the print resolution (as ``savefig`` does); the renderer."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    fig.set_dpi(PRINT_DPI)
    canvas.draw()
    return canvas.get_renderer()


def clipped_texts(fig: Figure) -> list[str]:
    """Texts (``repr``, with their extent) that reach outside the figure."""
    renderer = _draw(fig)
    box = fig.bbox
    out = []
    for text in _texts(fig):
        ext = text.get_window_extent(renderer)
        if ext.x0 < box.x0 - SLACK or ext.y0 < box.y0 - SLACK or ext.x1 > box.x1 + SLACK or ext.y1 > box.y1 + SLACK:
            out.append(f"{text.get_text()!r} at {ext.bounds} outside {box.bounds}")
    return out


def _intersect(a: Bbox, b: Bbox) -> bool:
    return a.x0 < b.x1 - SLACK and b.x0 < a.x1 - SLACK and a.y0 < b.y1 - SLACK and b.y0 < a.y1 - SLACK


def _points(ax: Axes) -> np.ndarray:
    """Display coordinates of the data points drawn in ``ax`` (line vertices, scatter points)."""
    chunks = [np.empty((0, 2))]
    for line in ax.lines:
        xy = line.get_xydata()
        if isinstance(line, Line2D) and len(xy):
            chunks.append(ax.transData.transform(np.asarray(xy, dtype=float)))
    for coll in ax.collections:
        if isinstance(coll, PathCollection) and len(coll.get_offsets()):
            chunks.append(coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), dtype=float)))
    pts = np.concatenate(chunks)
    inside = ax.bbox
    keep = ((pts[:, 0] >= inside.x0) & (pts[:, 0] <= inside.x1) & (pts[:, 1] >= inside.y0) & (pts[:, 1] <= inside.y1))
    return pts[keep & np.isfinite(pts).all(axis=1)]


def _covers(box: Bbox, pts: np.ndarray) -> int:
    if not len(pts):
        return 0
    return int(((pts[:, 0] > box.x0 + SLACK) & (pts[:, 0] < box.x1 - SLACK)
                & (pts[:, 1] > box.y0 + SLACK) & (pts[:, 1] < box.y1 - SLACK)).sum())


def overlaps(fig: Figure) -> list[str]:
    """Every overlap found (see the module docstring), as readable strings."""
    renderer = _draw(fig)
    found = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        notes = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts if t.get_visible() and t.get_text()]
        pts = _points(ax)
        legend = ax.get_legend()
        legend_box = legend.get_window_extent(renderer) if legend is not None else None
        for i, (text, box) in enumerate(notes):
            for other, other_box in notes[i + 1:]:
                if _intersect(box, other_box):
                    found.append(f"annotations {text!r} and {other!r} overlap")
            if _covers(box, pts):
                found.append(f"annotation {text!r} covers {_covers(box, pts)} data points")
            if legend_box is not None and _intersect(box, legend_box):
                found.append(f"the legend covers annotation {text!r}")
        if legend_box is not None and _covers(legend_box, pts):
            found.append(f"the legend covers {_covers(legend_box, pts)} data points")
        for axis in (ax.xaxis, ax.yaxis):
            labels = [(t.get_text(), t.get_window_extent(renderer)) for t in axis.get_ticklabels()
                      if t.get_visible() and t.get_text()]
            for (a, box_a), (b, box_b) in zip(labels, labels[1:]):
                if _intersect(box_a, box_b):
                    found.append(f"tick labels {a!r} and {b!r} overlap")
    for legend in fig.legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            if ax.get_visible() and _intersect(box, ax.get_tightbbox(renderer)):
                found.append(f"the figure legend overlaps an axes ({ax.get_title()!r})")
        if fig._suptitle is not None and _intersect(box, fig._suptitle.get_window_extent(renderer)):
            found.append("the figure legend overlaps the title")
    return found
