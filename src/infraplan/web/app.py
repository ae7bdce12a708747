"""The FastAPI app: JSON API under /api, pages at /, /train and /serve, plotly.js and the
page script under /static. Bound to 127.0.0.1 by default; no CDN, no files read or written
on behalf of a request.

    uvicorn.run(create_app(), host="127.0.0.1", port=8000)
"""

from __future__ import annotations

import json
import sys
from email.message import Message

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from infraplan.errors import InputError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MAX_BODY_BYTES = 256 * 1024  # a request body (an uploaded config.json included)


JSON_HINT = "send a JSON object with Content-Type: application/json"
NOT_JSON = ("body: Content-Type", "body: no Content-Type")  # the 415 answers' openings


class BodyLimit:
    """ASGI middleware: a body over `max_bytes` (declared, or counted as it streams in) gets
    413 without being read further; a POST body not declared JSON gets 415, one that is not
    a JSON object 422, each with one message, however it fails (FastAPI answers 400 or 422
    in several wordings)."""

    def __init__(self, app, max_bytes: int = MAX_BODY_BYTES):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                return await _send_error(send, 400, "content-length is not a number")
            if size > self.max_bytes:
                return await _send_error(send, 413, self._message(size))
        # read the whole body first (at most max_bytes), then replay it to the app
        chunks, seen = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.max_bytes:
                return await _send_error(send, 413, self._message(seen))
            if not message.get("more_body", False):
                break
        body, replayed = b"".join(chunks), False
        problem = json_body_problem(scope, body) if scope["method"] == "POST" else None
        if problem:  # a body not declared JSON is 415 (Unsupported Media Type)
            return await _send_error(send, 415 if problem.startswith(NOT_JSON) else 422,
                                     problem)

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()  # wait for the disconnect, as a server would
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def _message(self, size: int) -> str:
        return (f"request body of {size:,} bytes exceeds the cap of {self.max_bytes:,} bytes. "
                "To fix: send a smaller body (a config.json alone, without weights)")


def json_body_problem(scope, body: bytes) -> str | None:
    """What is wrong with a POST body that should be a JSON object, or None."""
    declared = dict(scope.get("headers") or []).get(b"content-type", b"").decode("latin-1")
    kind = Message()
    kind["content-type"] = declared
    subtype = kind.get_content_subtype()
    if kind.get_content_maintype() != "application" or not (
            subtype == "json" or subtype.endswith("+json")):
        what = f"Content-Type {declared!r} is not JSON" if declared else "no Content-Type"
        return f"body: {what}; {JSON_HINT}"
    if not body.strip():
        return f"body: empty; {JSON_HINT}"
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        return f"body: malformed JSON at character {exc.pos} ({exc.msg}); {JSON_HINT}"
    except UnicodeDecodeError:
        return f"body: not UTF-8 text; {JSON_HINT}"
    except RecursionError:
        return f"body: malformed JSON (nested too deeply); {JSON_HINT}"
    except ValueError:  # Python reads at most this many digits of an integer
        return (f"body: malformed JSON (an integer of more than "
                f"{sys.get_int_max_str_digits():,} digits); {JSON_HINT}")
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "true or false",
                type(None): "null"}.get(type(value), "a number")
        return f"body: {kind}, not a JSON object; {JSON_HINT}"
    return None


async def _send_error(send, status: int, detail: str) -> None:
    body = JSONResponse({"detail": detail}).body
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _validation_message(exc: RequestValidationError) -> str:
    """One line: 'gpus: List should have at most 3 items; tokens: ...'."""
    parts = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        got = err.get("input")
        if "got" not in msg and not isinstance(got, (dict, list, type(None))):
            shown = json.dumps(got, default=str)
            msg += f" (got {shown if len(shown) <= 40 else shown[:30] + '...'})"
        parts.append(f"{'.'.join(loc) or 'body'}: {msg}")
    return "; ".join(parts)


def create_app() -> FastAPI:
    from infraplan import __version__
    from infraplan.web.api import TooLarge, router
    from infraplan.web.pages import not_found, pages

    # the interactive docs pages load their scripts from a CDN: off; the schema stays
    app = FastAPI(title="infraplan", version=__version__, docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json",
                  description="Plan, simulate and check AI infrastructure: the library "
                              "calls of the `infraplan` CLI as a JSON API.")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        # a browser path that is no page gets a page; the API (and any other status) JSON
        path = request.url.path
        if exc.status_code == 404 and request.method in ("GET", "HEAD") and not (
                path == "/api" or path.startswith(("/api/", "/static/", "/openapi"))):
            return not_found(path)
        return await http_exception_handler(request, exc)

    @app.exception_handler(TooLarge)
    async def too_large(request: Request, exc: TooLarge):
        return JSONResponse({"detail": str(exc)}, status_code=413)

    @app.exception_handler(InputError)
    async def bad_input(request: Request, exc: InputError):
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError):
        return JSONResponse({"detail": _validation_message(exc)}, status_code=422)

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception):
        # a defect, not bad input: still JSON (the server logs the traceback)
        return JSONResponse({"detail": f"internal error ({type(exc).__name__}); please "
                                       "report it with the request"}, status_code=500)

    app.include_router(router)
    app.include_router(pages)
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)
    return app


def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
    import uvicorn

    uvicorn.run(create_app(), host=host, port=port, log_level="warning")
