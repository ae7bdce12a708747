"""The HTML report: one self-contained file that opens offline (plotly.js inlined from the
installed `plotly` package, no CDN, no web fonts), readable on a laptop and on a phone.

    html = render_report("examples/train-llama-3.1-70b.yaml")
    write_report("examples/serve-llama8b-chat.yaml", "report.html")  # atomic

The sections come from report/document.py; the web UI inserts the same `render_sections`
fragment and draws the same figures.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import tempfile
from functools import lru_cache
from html import escape
from pathlib import Path

from infraplan.errors import InputError
from infraplan.files import probe_path

CSS = """
:root { --fg: #1d2430; --muted: #5b6573; --line: #dde2e8; --accent: #2f6fb0;
  --bg: #ffffff; --card: #f6f8fa; --na: #8a6d1f; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg); line-height: 1.45;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
  sans-serif; -webkit-text-size-adjust: 100%; }
main, header.top { max-width: 1180px; margin: 0 auto; padding: 0 16px; }
header.top { padding-top: 18px; }
header.top h1 { font-size: 1.5rem; margin: 0 0 4px; }
header.top p { margin: 0 0 8px; color: var(--muted); }
nav.toc { display: flex; flex-wrap: wrap; gap: 6px; margin: 10px 0 4px; }
nav.toc a { font-size: 0.85rem; text-decoration: none; color: var(--accent);
  border: 1px solid var(--line); border-radius: 999px; padding: 2px 10px; white-space: nowrap; }
nav.toc span { font-size: 0.8rem; font-weight: 700; color: var(--muted); padding: 3px 4px 0 0; }
section.heading { border-top: 1px solid var(--line); padding: 14px 0 6px; }
section.heading h2 { font-size: 1.2rem; margin: 0 0 10px; }
section.heading h2 small { font-size: 0.72rem; font-weight: 600; color: var(--muted);
  letter-spacing: 0.06em; margin-right: 8px; }
dl.items { display: grid; grid-template-columns: repeat(auto-fill, minmax(210px, 1fr));
  gap: 8px; margin: 0 0 12px; }
dl.items div { background: var(--card); border-radius: 8px; padding: 8px 10px; min-width: 0; }
dl.items dt { font-size: 0.78rem; color: var(--muted); }
dl.items dd { margin: 2px 0 0; font-weight: 600; overflow-wrap: anywhere; }
.table-wrap { overflow-x: auto; -webkit-overflow-scrolling: touch; margin: 0 0 12px;
  border: 1px solid var(--line); border-radius: 8px;
  /* a shadow at an edge with more table past it (phones scroll wide tables) */
  background: linear-gradient(to right, var(--bg) 30%, rgba(255, 255, 255, 0)) left / 32px
    100% no-repeat local, linear-gradient(to left, var(--bg) 30%, rgba(255, 255, 255, 0))
    right / 32px 100% no-repeat local, radial-gradient(farthest-side at 0 50%,
    rgba(0, 0, 0, 0.2), transparent) left / 12px 100% no-repeat scroll,
    radial-gradient(farthest-side at 100% 50%, rgba(0, 0, 0, 0.2), transparent) right / 12px
    100% no-repeat scroll; }
table { border-collapse: collapse; width: 100%; font-size: 0.85rem; }
caption { text-align: left; font-weight: 600; padding: 6px 10px; }
th, td { padding: 5px 8px; border-top: 1px solid var(--line); text-align: left;
  white-space: nowrap; }
/* a long text cell wraps at its spaces only: a token stays whole (its column widens and
   the table scrolls in its box), never 'configuratio / n' or 'recompute=n / one' */
th.wrap, td.wrap { white-space: normal; min-width: 14em; overflow-wrap: normal; }
th { vertical-align: bottom; }
th.split { white-space: normal; }
th { background: var(--card); font-weight: 600; }
td.empty { color: var(--muted); font-style: italic; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 520px),
  1fr)); gap: 12px; margin: 0 0 12px; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 8px; padding: 6px;
  min-width: 0; }
figcaption { font-weight: 600; font-size: 0.9rem; padding: 2px 4px 0; }
.figure { width: 100%; min-height: 320px; min-width: 0; }
p.para { margin: 4px 0; font-size: 0.9rem; color: var(--muted); overflow-wrap: anywhere; }
ul.paras { margin: 0 0 6px; padding-left: 22px; font-size: 0.9rem; color: var(--muted);
  overflow-wrap: anywhere; }
p.table-note { margin: -6px 0 10px; }
p.na { color: var(--na); font-style: italic; margin: 4px 0 8px; }
footer { max-width: 1180px; margin: 20px auto; padding: 0 16px; color: var(--muted);
  font-size: 0.8rem; }
@media (max-width: 600px) {
  body { font-size: 14px; }
  header.top h1 { font-size: 1.25rem; }
  dl.items { grid-template-columns: repeat(2, minmax(0, 1fr)); }
  th, td { padding: 4px 7px; }
  .figure { min-height: 300px; }
  figure { padding: 2px; }
}
"""

# draws every <div data-figure="key"> from the document's figures (report and web page);
# a horizontal bar chart's labels wrap ('1 x h100-sxm5-80gb, vllm, weights bf16, KV bf16'
# on one line left a phone's chart 15% of its width for the bars)
FIGURE_JS = """
function infraplanLines(text, width) {
  var lines = [];
  String(text).split(' ').forEach(function (word) {
    var last = lines.length - 1;
    if (last >= 0 && lines[last].length + 1 + word.length <= width) {
      lines[last] += ' ' + word;
    } else { lines.push(word); }
  });
  return lines;
}
function infraplanWrapBars(el, layout, data) {
  var bars = data.filter(function (t) { return t.orientation === 'h'; });
  if (!bars.length) { return; }
  var width = el.clientWidth < 600 ? 16 : 32;
  var labels = bars[0].y.map(function (y) { return infraplanLines(y, width); });
  layout.yaxis = Object.assign({}, layout.yaxis, {tickmode: 'array', tickvals: bars[0].y,
    ticktext: labels.map(function (l) { return l.join('<br>'); })});
  if (layout.height) {  // room for the lines past two a bar
    layout.height += 16 * labels.reduce(function (n, l) {
      return n + Math.max(0, l.length - 2); }, 0);
  }
}
function infraplanDraw(root, figures) {
  root.querySelectorAll('[data-figure]').forEach(function (el) {
    var f = figures[el.getAttribute('data-figure')];
    if (!f || typeof Plotly === 'undefined') { return; }
    var layout = Object.assign({}, f.layout, {title: {text: ''}});  // the caption shows it
    layout.margin = Object.assign({}, layout.margin, {t: 10});
    infraplanWrapBars(el, layout, f.data);
    Plotly.newPlot(el, f.data, layout, {responsive: true, displaylogo: false,
      modeBarButtonsToRemove: ['select2d', 'lasso2d']});
  });
}
"""


# the page icon inline (a browser asks for /favicon.ico otherwise: a 404 on the web UI); base64
# so that the page's text names no http:// address, not even the SVG namespace
ICON_SVG = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" '
            'height="16" rx="3" fill="#2f6fb0"/><path d="M3 12h2V7H3zm4 0h2V4H7zm4 0h2V9h-2z" '
            'fill="#fff"/></svg>')
FAVICON = ('<link rel="icon" href="data:image/svg+xml;base64,'
           f'{base64.b64encode(ICON_SVG.encode()).decode()}">')


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.min.js as bundled with the installed `plotly` Python package."""
    from importlib import resources

    try:
        return (resources.files("plotly") / "package_data" / "plotly.min.js").read_text(
            encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        raise InputError("the HTML report needs the plotly package (for its bundled "
                         "plotly.min.js)", fix="pip install 'infraplan[web]'") from None


def _anchor(heading: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in heading.lower()).strip("-")


# '6 (8 billed)': the GPUs a plan uses and those its whole instances bill
NUMBER = re.compile(r"[-+]?\$?[\d,]*\.?\d+(e[-+]?\d+)?\s*(%|ms|s|days|h|GiB|[kMBT])?"
                    r"( / [\d,.]+| \([\d,]+ billed\))?")


def _looks_numeric(text: str) -> bool:
    """A number with at most a short unit: right-aligned in tables."""
    return NUMBER.fullmatch(text.strip()) is not None


# a text column with a cell longer than this wraps (a plan, a cost's basis), and so does a
# header longer than SPLIT_CHARS ('time to train'); the rest stays on one line. So a desktop
# column holds the whole table without scrolling
WRAP_CHARS = 28
SPLIT_CHARS = 12


def _table(t: dict) -> str:
    columns = range(len(t["columns"]))
    numeric = [bool(t["rows"]) and all(_looks_numeric(r[i]) or r[i] == "-" for r in t["rows"])
               for i in columns]
    kind = ["num" if numeric[i] else "wrap"
            if any(len(r[i]) > WRAP_CHARS for r in t["rows"]) else "" for i in columns]

    def cls(*names: str) -> str:
        names = " ".join(n for n in names if n)
        return f' class="{names}"' if names else ""

    head = "".join(f'<th{cls(k, "split" if len(c) > SPLIT_CHARS else "")} scope="col">'
                   f"{escape(c)}</th>" for c, k in zip(t["columns"], kind, strict=True))
    body = "".join("<tr>" + "".join(f"<td{cls(k)}>{escape(c)}</td>"
                                    for c, k in zip(r, kind, strict=True)) + "</tr>"
                   for r in t["rows"])
    if not t["rows"]:  # a header over nothing read as a table that failed to load
        body = f'<tr><td class="empty" colspan="{len(t["columns"])}">none</td></tr>'
    notes = "".join(f'<p class="para table-note">{escape(n)}</p>' for n in t.get("notes", ()))
    return (f'<div class="table-wrap"><table><caption>{escape(t["title"])}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{notes}")


def _figure_title(figure: dict) -> str:
    return str(figure.get("layout", {}).get("title", {}).get("text", ""))


LEAD = re.compile(r"([A-Za-z][A-Za-z ]{0,39}): (.+)", re.DOTALL)  # 'Why other choices lost'


def _paragraphs(paragraphs: list[str]) -> list[str]:
    """Each paragraph as <p>; a run of paragraphs that open with the same short lead ('Why
    other choices lost: ...', thirty times on a training plan) as that lead once over a
    list of the rest."""
    out, n = [], 0
    while n < len(paragraphs):
        lead = LEAD.fullmatch(paragraphs[n])
        run = n + 1
        while lead and run < len(paragraphs) and paragraphs[run].startswith(lead[1] + ": "):
            run += 1
        if run - n > 1:
            items = "".join(f"<li>{escape(LEAD.fullmatch(p)[2])}</li>"
                            for p in paragraphs[n:run])
            out.append(f'<p class="para">{escape(lead[1])}:</p><ul class="paras">{items}</ul>')
        else:
            out.append(f'<p class="para">{escape(paragraphs[n])}</p>')
        n = run
    return out


def render_sections(doc: dict) -> str:
    """The sections of a document as an HTML fragment (navigation included)."""
    toc, parts, framework = [], [], None
    for s in doc["sections"]:
        if s["framework"] != framework:
            framework = s["framework"]
            toc.append(f"<span>{escape(framework)}</span>")
        anchor = f'{s["framework"].lower()}-{_anchor(s["heading"])}'
        toc.append(f'<a href="#{anchor}">{escape(s["heading"])}</a>')
        out = [(f'<section class="heading" id="{anchor}"><h2><small>'
                f'{escape(s["framework"])}</small>{escape(s["heading"])}</h2>')]
        if s["items"]:
            out.append('<dl class="items">' + "".join(
                f'<div data-label="{escape(i["label"])}"><dt>{escape(i["label"])}</dt>'
                f'<dd>{escape(i["text"])}</dd></div>' for i in s["items"]) + "</dl>")
        out += [_table(t) for t in s["tables"]]
        shown = [f for f in s["figures"] if f in doc["figures"]]
        if shown:
            out.append('<div class="figures">' + "".join(
                f'<figure><figcaption>{escape(_figure_title(doc["figures"][f]))}</figcaption>'
                f'<div class="figure" id="fig-{escape(f)}" data-figure="{escape(f)}"></div>'
                "</figure>" for f in shown) + "</div>")
        out += _paragraphs(s["paragraphs"])
        if s["not_applicable"]:
            out.append(f'<p class="na">{escape(s["not_applicable"])}</p>')
        parts.append("".join(out) + "</section>")
    return f'<nav class="toc">{"".join(toc)}</nav>' + "".join(parts)


def script_json(value) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' at all, as \\u escapes (the
    same string to JSON.parse), so neither '</script>' nor '<!--' changes how the HTML
    parser reads the element."""
    text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_document(doc: dict) -> str:
    """A whole self-contained page for one document."""
    title = escape(doc["title"])
    kind = {"training": "training plan", "serving": "serving plan",
            "memory": "memory check"}[doc["kind"]]
    subtitle = f"infraplan {kind} for {doc['model']}" + (
        f". {doc['description']}" if doc.get("description") else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}: infraplan report</title>
{FAVICON}
<style>{CSS}</style>
<script>{plotly_js()}</script>
</head><body>
<header class="top"><h1>{title}</h1>
<p>{escape(subtitle)}</p>
</header>
<main>{render_sections(doc)}</main>
<footer>Generated by infraplan. Memory in GiB (2<sup>30</sup> bytes), storage and traffic in
GB (10<sup>9</sup> bytes); every figure is the library's.</footer>
<script type="application/json" id="infraplan-data">{script_json(doc)}</script>
<script>{FIGURE_JS}
(function () {{
  var doc = JSON.parse(document.getElementById('infraplan-data').textContent);
  infraplanDraw(document, doc.figures);
}})();
</script>
</body></html>
"""


def render_report(scenario_path: str | Path, progress=None, seed: int | None = None) -> str:
    """The HTML report of a training, memory or serving scenario file."""
    from infraplan.report.document import build_document

    plotly_js()  # fail on a missing plotly before the (long) planning run
    return render_document(build_document(scenario_path, progress, seed))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# What marks a file this module wrote: only such a file is replaced without asking.
REPORT_MARK = "infraplan report</title>"


def check_output(path: str | Path) -> Path:
    """The folder `path` would be written in; an InputError if `path` cannot be a new file
    there (a missing folder, a directory) or names something that is not an earlier report
    (the scenario itself, a notes file, a device, a pipe, a symbolic link): replacing it
    would destroy what the user saved."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    is_dir, is_file = probe_path(path, "output", fix="give another -o path")
    if is_dir:
        raise InputError(f"output {str(path)!r} is a directory, not a file",
                         fix=f"give a file path, e.g. -o {str(path / 'report.html')!r}")
    if path.is_symlink() or (path.exists() and not is_file):
        raise InputError(f"output {str(path)!r} is a link, device or pipe, not a file",
                         fix="give the report a path of its own")
    if is_file and not _is_report(path):
        raise InputError(f"output {str(path)!r} exists and is not an infraplan report; it "
                         "is left as it is", fix="give a new -o path, or move the file away")
    if not folder.is_dir():
        raise InputError(f"output folder {str(folder)!r} does not exist",
                         fix="create it or give another -o path")
    return folder


def _is_report(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return REPORT_MARK in handle.read(4096)
    except OSError:
        return False


def write_atomic(path: str | Path, text: str) -> Path:
    """Write `text` to `path` through a temporary file in the same folder and os.replace:
    readers see the old file or the whole new one, never half of it."""
    path = Path(path)
    folder = check_output(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        # mkstemp makes it private; a report is not, and a replaced one keeps its mode
        os.chmod(tmp, stat.S_IMODE(path.stat().st_mode) if path.is_file()
                 else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):  # a read-only folder, a full disk
            raise InputError(f"cannot write {str(path)!r} ({exc.strerror or exc})",
                             fix="give another -o path") from None
        raise
    return path


def write_report(scenario_path: str | Path, out_path: str | Path, progress=None,
                 seed: int | None = None) -> Path:
    """Render the report and write it atomically; on any failure no file is left."""
    check_output(out_path)  # before the (long) planning run
    return write_atomic(out_path, render_report(scenario_path, progress, seed=seed))
