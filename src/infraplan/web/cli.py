"""`infraplan report SCENARIO.yaml -o report.html` and `infraplan ui`: registered by
src/infraplan/cli.py through `add_report(sub)` and `add_ui(sub)`. Bad input raises
InputError, which the CLI prints on one line and exits 2."""

from __future__ import annotations

import argparse
import socket

from infraplan.errors import InputError
from infraplan.report.output import add_output_flags, emit, progress


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be in 1..65535, got {value}")
    return value


def add_report(sub) -> None:
    p = sub.add_parser("report", help="one self-contained HTML report of a scenario",
                       description="Plan (and simulate) a training or serving scenario and "
                                   "write one HTML file with its numbers and plots under the "
                                   "SCALE and DEPLOY headings; a memory scenario gets its "
                                   "breakdown and fixes. It opens offline.")
    p.add_argument("scenario", help="training, memory or serving scenario YAML (see "
                                    "examples/)")
    p.add_argument("-o", "--output", default="report.html",
                   help="HTML file to write (default: report.html); written atomically, "
                        "and never over an existing file that is not an infraplan report")
    from infraplan.cli import add_seed_flag  # loaded: it is what calls add_report

    add_seed_flag(p, "seed (serving) or run.seed (training)")
    add_output_flags(p, json_what="the written file's path and size in bytes as ",
                     quiet_what="the written file's path")
    p.set_defaults(run=run_report)


def run_report(args) -> int:
    from infraplan.report.html import write_report

    with progress(args, "planning") as tick:
        path = write_report(args.scenario, args.output, progress=tick, seed=args.seed)
    size = path.stat().st_size
    return emit(args, "report", {"output": str(path), "bytes": size},
                lambda: f"wrote {path} ({size / 1e6:.1f} MB)",
                lambda: str(path))


def add_ui(sub) -> None:
    p = sub.add_parser("ui", help="the web UI on http://127.0.0.1:8000",
                       description="Serve the web UI and its JSON API (OpenAPI schema at "
                                   "/openapi.json). Local only unless --host says otherwise.")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to bind (default 127.0.0.1; 0.0.0.0 exposes it to the "
                        "network)")
    p.add_argument("--port", type=_port, default=8000, help="TCP port (default 8000)")
    p.set_defaults(run=run_ui)


def run_ui(args) -> int:
    import importlib

    try:  # imported by name: pyflakes reads no noqa, and an unused import is flagged
        for name in ("fastapi", "uvicorn"):
            importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise InputError(f"the web UI needs {exc.name}",
                         fix="pip install 'infraplan[web]'") from None
    from infraplan.web.app import serve

    _check_bind(args.host, args.port)
    print(f"infraplan UI on http://{args.host}:{args.port}/ (Ctrl-C stops it)")
    serve(args.host, args.port)
    return 0


def _check_bind(host: str, port: int) -> None:
    """Refuse, with the reason, an address the server could not listen on (uvicorn would
    log it and exit 3): a name that does not resolve, a port in use or reserved."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise InputError(f"--host {host!r} does not resolve ({exc})",
                         fix="give an address of this machine: 127.0.0.1 (local only) or "
                             "0.0.0.0 (every interface)") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise InputError(f"cannot listen on {host}:{port} ({exc.strerror})",
                             fix="pick another --port (ports below 1024 need root) or "
                                 "--host") from None
