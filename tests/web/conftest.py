"""Fixtures of the web tests: the app under TestClient, a live server for the browser."""

from __future__ import annotations

import functools
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="session")
def app():
    require("fastapi")
    require("httpx")
    from infraplan.web.app import create_app

    return create_app()


@pytest.fixture(scope="session")
def client(app):
    from fastapi.testclient import TestClient

    with TestClient(app) as c:
        yield c


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def live_server(app):
    """The app served by uvicorn on 127.0.0.1 and a free port, in a thread."""
    uvicorn = require("uvicorn")
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium through Playwright (the browser tests skip without it)."""
    sync_api = require("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-gpu",
                                    "--disable-background-networking"])
        yield b
        b.close()


def section_of(doc: dict, heading: str) -> dict:
    """A report document's section by its heading."""
    return next(s for s in doc["sections"] if s["heading"] == heading)


def items_of(section: dict) -> dict:
    """A section's items, label -> text."""
    return {i["label"]: i["text"] for i in section["items"]}


@functools.lru_cache(maxsize=None)
def example_document(name: str) -> dict:
    """The report document of examples/NAME, built once for the whole session (a 70B
    plan takes seconds); read it, never change it."""
    from infraplan.report.document import build_document

    return build_document(EXAMPLES / name)


@pytest.fixture(scope="module")
def spot_doc():
    """The report document of examples/article-4-2b-spot.yaml (reserved baseline + spot)."""
    return example_document("article-4-2b-spot.yaml")
