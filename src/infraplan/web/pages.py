"""The pages: plain HTML forms (/, /memory, /train, /serve) and the static files they load
(plotly.js from the installed plotly package, the page script, the style sheet). The page
script calls the JSON API and inserts the same report sections the HTML report shows; the
form state lives in the URL's query string, so a plan can be shared as a link."""

from __future__ import annotations

from functools import lru_cache
from html import escape
from importlib import resources
from typing import get_args

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from infraplan.report.html import CSS, FAVICON, FIGURE_JS, plotly_js
from infraplan.workloads import GradDtype, OptimizerName, Precision, Recompute

pages = APIRouter(include_in_schema=False)

FORM_CSS = """
header.bar { background: #1d2430; color: #fff; }
header.bar div { max-width: 1180px; margin: 0 auto; padding: 10px 16px; display: flex;
  gap: 16px; align-items: baseline; flex-wrap: wrap; }
header.bar a { color: #fff; text-decoration: none; }
header.bar a.brand { font-weight: 700; font-size: 1.1rem; margin-right: 8px; }
form.plan { display: grid; grid-template-columns: repeat(auto-fill, minmax(190px, 1fr));
  gap: 10px 14px; margin: 14px 0; padding: 12px; background: var(--card);
  border-radius: 10px; }
form.plan fieldset { grid-column: 1 / -1; border: 0; padding: 0; margin: 6px 0 0;
  font-weight: 700; font-size: 0.85rem; color: var(--muted); }
form.plan label { display: flex; flex-direction: column; font-size: 0.8rem;
  color: var(--muted); gap: 3px; min-width: 0; }
form.plan input, form.plan select { font: inherit; font-size: 0.95rem; padding: 6px 8px;
  border: 1px solid #c5ccd5; border-radius: 6px; background: #fff; color: var(--fg);
  width: 100%; min-width: 0; }
form.plan select[multiple] { min-height: 7.5em; }
form.plan .actions { grid-column: 1 / -1; display: flex; gap: 12px; align-items: center;
  flex-wrap: wrap; }
button { font: inherit; font-weight: 600; background: var(--accent); color: #fff; border: 0;
  border-radius: 6px; padding: 8px 18px; cursor: pointer; }
button[disabled] { opacity: 0.6; cursor: wait; }
.status { color: var(--muted); font-size: 0.9rem; }
.error { color: #a12a2a; background: #fdf0f0; border: 1px solid #f1c6c6; border-radius: 8px;
  padding: 8px 12px; margin: 8px 0; overflow-wrap: anywhere; }
.notice { color: #6b4e00; background: #fdf7e3; border: 1px solid #eedca0;
  border-radius: 8px; padding: 8px 12px; margin: 8px 0; overflow-wrap: anywhere; }
.hidden { display: none !important; }
form.plan label.invalid input, form.plan label.invalid select { border-color: #a12a2a;
  box-shadow: 0 0 0 1px #a12a2a; }
.field-error { color: #a12a2a; font-size: 0.78rem; overflow-wrap: anywhere; }
.hint { font-size: 0.85rem; color: var(--muted); }
.apply { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin: 8px 0; }
.apply button { background: #fff; color: var(--accent); border: 1px solid var(--accent);
  padding: 5px 12px; }
#result [data-label="verdict"] dd { font-size: 1.25rem; }
/* a hyphenated token of a table ('h100-sxm5-80gb', 'GPU-hours'): the browser would break
   it after a hyphen; app.js wraps it in this */
#result .nobr { white-space: nowrap; }
@media (max-width: 600px) {
  form.plan { grid-template-columns: repeat(2, minmax(0, 1fr)); padding: 10px; gap: 8px; }
  form.plan select[multiple] { min-height: 6em; }
  /* a phone shows every column of a results table it can (latency's p90 and p99 are the
     SLO columns): text cells wrap at their spaces only (app.js keeps a hyphenated token
     whole), numbers stay whole, smaller type and padding; a table still wider scrolls in
     its box (.table-wrap) */
  #result table { font-size: 0.75rem; }
  #result th, #result td { padding: 3px 4px; white-space: normal; }
  #result td.num { white-space: nowrap; }
  #result th.wrap, #result td.wrap { min-width: 8em; }
  /* a table still wider (the load sweep's 7 columns) scrolls under a caption that stays
     whole in view */
  #result caption { position: sticky; left: 0; max-width: calc(100vw - 34px);
    box-sizing: border-box; }
}
"""


def _field(name: str, label: str, value: str = "", *, kind: str = "number",
           typ: str = "float", group: str = "", mode: str = "", step: str = "any",
           hint: str = "", key: str = "", placeholder: str = "") -> str:
    attrs = f'name="{name}" data-type="{typ}"' + (f' data-group="{group}"' if group else "")
    attrs += f' data-key="{key}"' if key else ""
    attrs += f' placeholder="{escape(placeholder)}"' if placeholder else ""
    wrap = f' data-mode="{mode}"' if mode else ""
    title = f' title="{escape(hint)}"' if hint else ""
    return (f'<label{wrap}{title}>{escape(label)}<input type="{kind}" {attrs} '
            f'value="{escape(value)}"' + (f' step="{step}"' if kind == "number" else "")
            + "></label>")


# the empty choice leaves the precision out: 16-bit, as the library's default (workloads)
SIXTEEN_BIT = ("", "16-bit (bf16; fp16 on V100, T4)")


def _select(name: str, label: str, options=(), *, typ: str = "str", catalog: str = "",
            default: str = "", multiple: bool = False, group: str = "", mode: str = "") -> str:
    attrs = f'name="{name}" data-type="{typ}"' + (f' data-group="{group}"' if group else "")
    if catalog:
        attrs += f' data-catalog="{catalog}" data-default="{escape(default)}"'
    wrap = f' data-mode="{mode}"' if mode else ""
    chosen = default.split(",") if multiple else [default]  # a list's default: a,b
    opts = "".join(f'<option value="{escape(v)}"{" selected" if v in chosen else ""}>'
                   f"{escape(text)}</option>" for v, text in options)
    return (f"<label{wrap}>{escape(label)}<select {attrs}{' multiple' if multiple else ''}>"
            f"{opts}</select></label>")


# what a GPU-hour costs: a catalog offer for the pricing, or the user's own price
PRICING = (("on_demand", "on demand"), ("spot", "spot"), ("reserved-1y", "reserved 1 year"),
           ("reserved-3y", "reserved 3 years"))
PRICE_FIELDS = (_select("pricing", "pricing", PRICING, default="on_demand")
                + _field("prices", "price ($ per GPU-hour)", kind="text", typ="prices",
                         placeholder="cheapest offer",
                         hint="one number for every accelerator (2.50) or name=price pairs "
                              "(h100=2.50, a100=1.60); empty: the catalog's cheapest offer "
                              "for the pricing"))


def _page(title: str, body: str, status_code: int = 200) -> HTMLResponse:
    """A page titled 'TITLE: infraplan' (the home page, title '': 'infraplan')."""
    full = f"{title}: infraplan" if title else "infraplan"
    return HTMLResponse(status_code=status_code, content=f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(full)}</title>
{FAVICON}
<link rel="stylesheet" href="/static/app.css">
<script src="/static/plotly.min.js"></script>
<script src="/static/app.js" defer></script>
</head><body>
<header class="bar"><div><a class="brand" href="/">infraplan</a><a href="/memory">Memory</a>
<a href="/train">Train</a><a href="/serve">Serve</a></div></header>
<main>{body}</main>
</body></html>""")


MODEL_PICKER = (_select("model", "model (catalog)", catalog="models", default="llama-3.1-8b")
                + '<label>or upload a config.json<input type="file" id="config-file" '
                  'accept=".json,application/json"></label>')
ACTIONS = ('<div class="actions"><button type="submit">{label}</button>'
           '<span class="status" id="status"></span></div>')
RESULT = ('<div id="notice" class="notice hidden" role="status"></div>'
          '<div id="inspect"></div><div id="error" class="error hidden" role="alert"></div>'
          '<div id="result"></div>')


@pages.get("/", response_class=HTMLResponse)
def home() -> HTMLResponse:
    return _page("", f"""<header class="top"><h1>infraplan</h1>
<p>Plan, simulate and check AI infrastructure: will it fit, how long, how much.</p></header>
<section class="heading"><h2>What do you want to plan?</h2>
<p><a href="/memory">Memory</a>: will a training or fine-tuning configuration fit? Memory
per accelerator by component, and the single changes that make it fit.</p>
<p><a href="/train">Training</a>: which accelerators, how many, which parallelism; time,
GPU-hours, cost, memory per accelerator, checkpoints.</p>
<p><a href="/serve">Serving</a>: the cheapest deployment that meets latency SLOs, or one
deployment simulated under traffic.</p></section>
<section class="heading"><h2>Inspect a model</h2>
<form class="plan" data-endpoint="/api/models/inspect" data-inspect="1">
{MODEL_PICKER}{_field("seq_len", "context length (tokens)", "4096", typ="int", step="1")}
{ACTIONS.format(label="Inspect")}</form>{RESULT}</section>""")


@pages.get("/memory", response_class=HTMLResponse)
def memory() -> HTMLResponse:
    def options(*names):
        return [(n, n) for n in names]

    def count(name, label, value="", hint="", empty=""):
        return _field(name, label, value, typ="int", step="1", hint=hint, placeholder=empty)

    form = "".join([
        "<fieldset>Model and accelerators</fieldset>", MODEL_PICKER,
        _select("gpu", "accelerator", catalog="gpus", default="h100-sxm5-80gb"),
        count("num_gpus", "accelerators in the job", "8"),
        "<fieldset>Parallelism</fieldset>",
        count("tp", "tensor parallel (tp)", "1"), count("pp", "pipeline stages (pp)", "1"),
        count("dp", "data parallel (dp)", hint="empty: num_gpus / (tp x pp x cp)",
              empty="the rest"),
        count("cp", "context parallel (cp)", "1"), count("ep", "expert parallel (ep)", "1"),
        count("etp", "experts' tensor parallel (etp)", hint="empty: tp; 1 lets EP span TP",
              empty="= tp"),
        count("vp", "virtual stages per rank (vp)", "1"),
        _select("zero", "ZeRO stage", options("0", "1", "2", "3"), typ="int", default="1"),
        _select("sequence_parallel", "sequence parallel (tp > 1)",
                [("false", "off"), ("true", "on")], typ="bool", default="false"),
        _select("recompute", "activation recompute", options(*get_args(Recompute)),
                default="none"),
        _field("recompute_fraction", "recompute share (full)", "",
               hint="with recompute full: the rest selective; empty = all layers",
               placeholder="1 (all layers)"),
        "<fieldset>Batch and precision</fieldset>",
        count("micro_batch", "micro-batch (sequences)", "1"),
        count("global_batch", "global batch (sequences)",
              hint="empty: pp micro-batches per step (a full pipeline)",
              empty="a full pipeline"),
        count("seq_len", "sequence length (tokens)", "4096"),
        _select("precision", "precision", [SIXTEEN_BIT, *options(*get_args(Precision))]),
        _select("grad_dtype", "gradients", [("", "as the precision"),
                                          *options(*get_args(GradDtype))]),
        _select("optimizer", "optimizer", options(*get_args(OptimizerName)), default="adamw"),
        _select("kernels", "kernels", [("fused", "fused (flash attention)"),
                                       ("eager", "eager (s x s scores)")], default="fused"),
        "<fieldset>Fine-tuning</fieldset>",
        _select("finetune", "method", [("full", "full training"),
                                       ("lora", "LoRA"), ("qlora", "QLoRA")], default="full"),
        count("lora_rank", "LoRA rank", hint="LoRA / QLoRA only; empty: 16", empty="16"),
        _field("lora_targets", "LoRA targets", "", kind="text", typ="list",
               hint="all-linear (default), attention, mlp, or q_proj,v_proj,...",
               placeholder="all-linear"),
        ACTIONS.format(label="Check memory")])
    return _page("Memory", f"""<header class="top"><h1>Will it fit?</h1>
<p class="hint">Memory per accelerator of one training or fine-tuning plan, as
<code>infraplan memory</code> computes it: weights, gradients, optimizer states, activations
and overheads at the fullest pipeline rank; when it does not fit, the single changes that
do. The form starts from 8 accelerators with ZeRO-1 (a common data-parallel job); the CLI
and <code>/api/memory</code>, given no <code>num_gpus</code> or <code>zero</code>, check 1
accelerator with ZeRO-0. The form lives in the address bar: copy it to share the check
(an uploaded config.json is named there, not carried).</p></header>
<form class="plan" data-endpoint="/api/memory">{form}</form>{RESULT}""")


@pages.get("/train", response_class=HTMLResponse)
def train() -> HTMLResponse:
    precisions = [SIXTEEN_BIT, *((p, p) for p in get_args(Precision))]
    optimizers = [(o, o) for o in get_args(OptimizerName)]
    form = "".join([
        "<fieldset>Workload</fieldset>", MODEL_PICKER,
        _field("tokens", "tokens to train on", "1e11"),
        _field("global_batch", "global batch (sequences)", "256", typ="int", step="1"),
        _field("seq_len", "sequence length (tokens)", "4096", typ="int", step="1"),
        _select("precision", "precision", precisions),
        _select("optimizer", "optimizer", optimizers, default="adamw"),
        "<fieldset>Accelerators</fieldset>",
        _select("gpus", "accelerators (up to 3)", typ="list", catalog="gpus",
                default="h100-sxm5-80gb", multiple=True),
        _field("min_count", "fewest GPUs", "8", typ="int", step="1"),
        _field("max_count", "most GPUs", "64", typ="int", step="1"),
        _field("count_step", "GPU count step (default: a node)", "", typ="int", step="1"),
        _select("storage", "training data tier", [("", "none (no data-loading check)")],
                catalog="storage"),
        PRICE_FIELDS,
        "<fieldset>Constraints</fieldset>",
        _field("deadline_days", "deadline (days)", ""),
        _field("budget_gpu_hours", "budget (GPU-hours)", ""),
        _field("top", "plans to show", "5", typ="int", step="1"),
        ACTIONS.format(label="Plan training")])
    return _page("Training plan", f"""<header class="top"><h1>Training plan</h1>
<p class="hint">Searches every parallel plan (TP, PP, DP, CP, ZeRO, micro-batch, recompute,
...) for each accelerator and GPU count, keeps what fits, ranks by time to train.
The form lives in the address bar: copy it to share the plan.</p></header>
<form class="plan" data-endpoint="/api/plan/train">{form}</form>{RESULT}""")


@pages.get("/serve", response_class=HTMLResponse)
def serve() -> HTMLResponse:
    dtypes = [(d, d) for d in ("bf16", "fp8", "int8", "int4", "fp4", "fp16")]
    kv = [("", "16-bit (default)"), ("fp8", "fp8")]
    form = "".join([
        "<fieldset>Question</fieldset>",
        _select("mode", "what to do", [("plan", "plan: cheapest deployment meeting the SLOs"),
                                       ("simulate", "simulate one deployment")],
                default="plan", typ="skip"),
        MODEL_PICKER,
        "<fieldset>Deployment</fieldset>",
        _select("gpus", "accelerators to compare (up to 3)", typ="list", catalog="gpus",
                default="h100-sxm5-80gb", multiple=True, mode="plan"),
        _field("tps", "tensor-parallel sizes (e.g. 1,2)", "1,2", kind="text", typ="list-int",
               mode="plan", key="tp"),
        # the API's default (PlanServeRequest.weight_dtypes): the checkpoint's and fp8
        _select("weight_dtypes", "weight formats",
                [("checkpoint", "checkpoint's own"), *dtypes], typ="list",
                default="checkpoint,fp8", multiple=True, mode="plan"),
        _select("kv_dtypes", "KV-cache formats", [("bf16", "16-bit"), ("fp8", "fp8")],
                typ="list", default="bf16", multiple=True, mode="plan"),
        _field("max_replicas", "most replicas", "16", typ="int", step="1", mode="plan"),
        _select("gpu", "accelerator", catalog="gpus", default="h100-sxm5-80gb",
                mode="simulate"),
        _select("tp", "tensor parallel", [(str(t), str(t)) for t in (1, 2, 4, 8)], typ="int",
                default="1", mode="simulate"),
        _field("replicas", "replicas", "1", typ="int", step="1", mode="simulate"),
        _select("weight_dtype", "weight format",
                [("", "checkpoint's own (default)"), *dtypes], mode="simulate"),
        _select("kv_dtype", "KV-cache format", kv, mode="simulate"),
        _select("engine", "engine", catalog="engines", default="vllm"),
        PRICE_FIELDS,
        "<fieldset>Traffic</fieldset>",
        _select("arrival", "arrivals", [("poisson", "Poisson"), ("gamma", "gamma (bursty)"),
                                        ("offline", "offline batch")], group="traffic",
                default="poisson"),
        _field("rate_per_s", "rate (requests/s)", "10", group="traffic"),
        _field("cv", "burstiness (gamma cv)", group="traffic", placeholder="2",
               hint="coefficient of variation of the gaps between arrivals; gamma only"),
        _field("num_requests", "requests to simulate", "1000", typ="int", step="1",
               group="traffic"),
        _field("input_mean_tokens", "prompt mean (tokens)", "1000", group="traffic"),
        _field("input_sigma", "prompt sigma (lognormal)", "0.8", group="traffic"),
        _field("output_mean_tokens", "output mean (tokens)", "250", group="traffic"),
        _field("output_sigma", "output sigma (lognormal)", "0.8", group="traffic"),
        _field("input_max_tokens", "longest prompt (tokens)", typ="int", step="1",
               group="traffic", placeholder="no cap"),
        _field("output_max_tokens", "longest output (tokens)", typ="int", step="1",
               group="traffic", placeholder="no cap"),
        _field("seed", "random seed", "0", typ="int", step="1",
               hint="the same seed draws the same requests"),
        "<fieldset>SLOs (p99)</fieldset>",
        # empty: no such SLO (the placeholder says so; the page asks for other fields)
        _field("ttft_p99_s", "time to first token (s)", "1.0", group="slo", placeholder="none"),
        _field("tpot_p99_s", "time per output token (s)", "0.05", group="slo",
               placeholder="none"),
        _field("e2e_p99_s", "end to end (s)", "", group="slo", placeholder="none"),
        ACTIONS.format(label="Run")])
    return _page("Serving plan", f"""<header class="top"><h1>Serving plan</h1>
<p class="hint">Plan: for each accelerator x TP x weight format, the fewest replicas that
meet the SLOs at the traffic's rate, cheapest first. Simulate: one deployment under the
traffic. The form lives in the address bar: copy it to share the result.</p></header>
<form class="plan" data-endpoint="/api/plan/serve"
 data-endpoint-plan="/api/plan/serve"
 data-endpoint-simulate="/api/simulate/serve">{form}</form>{RESULT}""")


PAGES = ("/", "/memory", "/train", "/serve")


def not_found(path: str) -> HTMLResponse:
    """The 404 of a browser path (an /api path answers JSON): the pages there are, and the
    closest one to the path asked for."""
    from difflib import get_close_matches

    near = get_close_matches(path.rstrip("/") or "/", PAGES, n=1, cutoff=0.6)
    hint = (f' Did you mean <a href="{near[0]}">{near[0]}</a>?' if near else "")
    links = ", ".join(f'<a href="{p}">{p}</a>' for p in PAGES)
    return _page("Page not found", f"""<header class="top"><h1>Page not found</h1>
<p>There is no page at <code>{escape(path)}</code>.{hint}</p>
<p class="hint">The pages are {links}; the JSON API is under /api (its schema:
<a href="/openapi.json">/openapi.json</a>).</p></header>""", status_code=404)


@lru_cache(maxsize=1)
def _script() -> str:
    return FIGURE_JS + (resources.files("infraplan.web") / "static" / "app.js").read_text(
        encoding="utf-8")


@pages.get("/static/plotly.min.js")
def plotly() -> Response:
    return Response(plotly_js(), media_type="text/javascript",
                    headers={"cache-control": "public, max-age=86400"})


@pages.get("/static/app.js")
def script() -> Response:
    return Response(_script(), media_type="text/javascript")


@pages.get("/static/app.css")
def style() -> Response:
    return Response(CSS + FORM_CSS, media_type="text/css")
