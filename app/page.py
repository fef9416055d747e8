"""``debate show OUT --html FILE``: stored debates as one self-contained HTML page.

Pure (no Ray, no model, no rich). :func:`write_page` writes a single file holding its CSS, its
JavaScript (``app/page.js``, plain browser JavaScript, no library) and the debates as JSON:
nothing is fetched from the network (no CDN, no web font, no image URL is loaded), so the page
opens from a laptop's disk or a cluster's shared folder in any current browser.

What the page shows: a list of the debates (question id, run and protocol, final answer ✓/✗)
with filters (all, wrong, right, changed its mind, disagreement) and a text search; the selected
debate's question, gold answer and run options, then per round (0-based: round 0 holds the first
answers) a graph — one circle per agent coloured by its answer (Okabe-Ito colour-blind-safe
palette, legend answer → colour, gold marked), the strongest model's agents ringed and starred,
an arrow per edge src → dst (who read whom), group summaries as nodes of their own, groups
boxed, pruned edges (CortexDebate) dashed grey, edge weights as line width — and each agent's
reply (model, answer ✓/✗, text, tokens, errors), the summaries, the vote, tie and consensus.
Rounds of more than :data:`FULL_GRAPH_AGENTS` agents are drawn compact (coloured dots, no
edges), and the page says so.

Input: :class:`app.transcript.DebateView` objects or their ``to_dict()`` dicts (the fields
the page reads are those of ``DebateView``; a missing one shows as absent). Model text is
untrusted: the page inserts every stored string as text (``textContent``), never as HTML, and
the embedded JSON escapes ``<``, ``>`` and ``&`` so a reply holding ``</script>`` cannot end the
data block. The page's Content-Security-Policy forbids every fetch and runs only the page's own
script, named by its sha256 hash (no ``'unsafe-inline'`` script). :func:`write_page` writes the
file whole or not at all (a temporary file in the same folder, fsync, rename).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import html
import json
import math
import os
import uuid
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from pathlib import Path
from typing import Any

FULL_GRAPH_AGENTS = 64  # rounds with more agents are drawn compact (dots, no edges)

_HERE = Path(__file__).resolve().parent
# the page's assets, next to this module (pyproject.toml's package-data ships them)
_CSS = _HERE / "page.css"
_JS = _HERE / "page.js"
# JSON inside <script type="application/json">: nothing in it may close the element or open a
# comment, and U+2028/2029 are escaped for old parsers; all stay valid JSON string escapes
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_AGENT_FIELDS = ("agent_id", "model", "group", "strong")


def _plain(value: Any) -> Any:
    """``value`` as JSON can hold it: dataclasses and mappings as dicts, sequences (numpy arrays
    too) as lists, numpy scalars as Python numbers, NaN / infinities / pandas NA as null, dates as
    ISO text, anything else as ``str``."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        return _plain(to_dict() if callable(to_dict) else dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (datetime, date)):
        return None if value != value else value.isoformat()  # pandas NaT is a datetime
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars
    if callable(tolist):
        return _plain(tolist())
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    try:
        if value != value:  # pandas NA / NaT compare unequal to themselves (or raise)
            return None
    except (TypeError, ValueError):
        return None
    return str(value)


def _view(view: Any) -> dict[str, Any]:
    """One debate as the page's JSON: a ``DebateView`` (or its dict) with every value plain and
    each agent as a dict (``to_dict`` may give ``(agent_id, model, group, strong)`` tuples)."""
    data = _plain(view.to_dict() if callable(getattr(view, "to_dict", None)) else view)
    if not isinstance(data, dict):
        raise TypeError(f"a debate view must be a DebateView or a dict, not {type(view).__name__}")
    agents = []
    for agent in data.get("agents") or []:
        agents.append(agent if isinstance(agent, dict) else dict(zip(_AGENT_FIELDS, agent, strict=False)))
    data["agents"] = agents
    return data


def page_json(views: Iterable[Any]) -> str:
    """The debates as the JSON text the page embeds (safe inside a ``<script>`` element)."""
    text = json.dumps([_view(v) for v in views], ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for raw, escaped in _JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def script_hash(script: str) -> str:
    """The Content-Security-Policy source that lets exactly ``script`` (the text of an inline
    ``<script>`` element, as the browser reads it) run: ``'sha256-<base64 digest>'``."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def page_html(views: Iterable[Any], title: str = "Debates") -> str:
    """The whole page as one HTML string (see the module docstring)."""
    data = page_json(views)
    settings = json.dumps({"fullGraphAgents": FULL_GRAPH_AGENTS})
    script = f"\n{_JS.read_text(encoding='utf-8')}"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        # no network: a policy that forbids every fetch and runs only the page's own script (by its
        # hash); inline styles stay allowed (the script sets style attributes; no data is CSS)
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        f"style-src 'unsafe-inline'; script-src {script_hash(script)}; img-src data:\">\n"
        f"<title>{html.escape(title)}</title>\n"
        f"<style>\n{_CSS.read_text(encoding='utf-8')}</style>\n</head>\n<body>\n"
        f'<header><h1 id="title">{html.escape(title)}</h1><span id="counts"></span></header>\n'
        '<div id="app"><nav id="side"></nav><main id="detail"></main></div>\n'
        f'<script type="application/json" id="debate-data">{data}</script>\n'
        f'<script type="application/json" id="page-settings">{settings}</script>\n'
        f"<script>{script}</script>\n"
        "</body>\n</html>\n"
    )


def write_page(views: Iterable[Any], path: str | Path, title: str = "Debates") -> Path:
    """Write the page of ``views`` (``DebateView`` objects or their dicts, in the order listed)
    to ``path`` (parent folders created) and return the path. The file needs nothing else:
    open it in a browser from wherever it lies. Written whole or not at all
    (:func:`write_atomic`): an ``OSError`` (a full disk) leaves ``path`` as it was."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, page_html(views, title))
    return out


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all: to a hidden temporary file in the
    same folder, fsync, then rename over ``path``. On any error (a full disk, an interrupt) the
    temporary file is removed, ``path`` is as it was, and the error is raised."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())  # the data is on disk before the name is
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
