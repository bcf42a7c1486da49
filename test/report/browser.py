"""Pages as headless Chromium renders them: layout measures and screenshots at phone and desktop widths.

:func:`measure` loads a page in an iframe of the given width inside a harness page and reads
back, after load: the document's ``scrollWidth`` against the frame's ``innerWidth`` (horizontal
overflow), every image (complete, natural size), the elements wider than the frame, every
table's width against its box (a wider table hides columns behind a scroll) and the height of
the lines each no-wrap cell's text takes.
:func:`screenshot` takes a full-width screenshot into :data:`ARTEFACTS` (kept after the run:
``build/test-output/`` of the repository; open the PNGs to look at the pages).
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from typing import Any

#: Where the screenshots stay after the tests (``build/`` is not committed).
ARTEFACTS = pathlib.Path(__file__).resolve().parents[2] / "build" / "test-output"
#: (name, width, height) of the two viewports every page is checked at.
WIDTHS = (("phone", 390, 844), ("desktop", 1280, 900))

HARNESS = """<!DOCTYPE html><html><body style="margin:0"><pre id="result">pending</pre>
<iframe id="page" src="{src}" style="border:0" width="{width}" height="{height}"></iframe>
<script>
const frame = document.getElementById("page");
frame.addEventListener("load", () => {{
  const win = frame.contentWindow, doc = frame.contentDocument;
  const settle = () => {{
    const images = Array.from(doc.images).map(img => ({{src: img.getAttribute("src"), complete: img.complete,
      width: img.naturalWidth, height: img.naturalHeight, shown: img.getBoundingClientRect().width}}));
    const wide = Array.from(doc.body.querySelectorAll("*")).filter(el => {{
      const r = el.getBoundingClientRect(); return r.right > win.innerWidth + 1 && !el.closest(".scroll");
    }}).map(el => el.tagName + (el.id ? "#" + el.id : "") + (el.className ? "." + el.className : ""));
    const tables = Array.from(doc.querySelectorAll("table")).map(t => ({{id: t.id,
      width: t.scrollWidth, box: t.parentElement.clientWidth}}));
    const nowrap = Array.from(doc.querySelectorAll("td.nowrap")).map(td => {{
      const range = doc.createRange(); range.selectNodeContents(td);
      return {{lines: new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top))).size, text: td.innerText}};
    }});
    document.getElementById("result").textContent = JSON.stringify({{title: doc.title,
      scrollWidth: doc.documentElement.scrollWidth, innerWidth: win.innerWidth, images: images, wide: wide,
      tables: tables, nowrap: nowrap, text: doc.body.innerText.slice(0, 20000)}});
  }};
  Promise.all(Array.from(doc.images).map(img => img.complete ? null :
    new Promise(done => {{ img.onload = done; img.onerror = done; }}))).then(settle);
}});
</script></body></html>
"""


def measure(chromium: Callable[..., Any], root: pathlib.Path, base_url: str, page: str, width: int, height: int,
            profile: pathlib.Path) -> dict[str, Any]:
    """Layout of ``base_url/page`` in a frame ``width`` x ``height`` (``root`` is the served directory)."""
    harness = f"harness-{width}.html"
    (root / harness).write_text(HARNESS.format(src=page, width=width, height=height), encoding="utf-8")
    done = chromium(profile, "--virtual-time-budget=20000", "--dump-dom", f"{base_url}/{harness}")
    start, end = done.stdout.find('<pre id="result">'), done.stdout.find("</pre>")
    assert start >= 0 and end > start, done.stdout[-2000:] + done.stderr[-2000:]
    import html

    return json.loads(html.unescape(done.stdout[start + len('<pre id="result">'):end]))


def screenshot(chromium: Callable[..., Any], url: str, name: str, width: int, height: int,
               profile: pathlib.Path) -> pathlib.Path:
    """A screenshot of ``url`` at ``width`` x ``height`` into :data:`ARTEFACTS` as ``name``."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTEFACTS / name
    shot.unlink(missing_ok=True)
    done = chromium(profile, f"--screenshot={shot}", f"--window-size={width},{height}",
                    "--virtual-time-budget=20000", url)
    assert shot.is_file(), done.stderr[-2000:]
    return shot
