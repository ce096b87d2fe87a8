"""The web console at ``/console/``: the files of ``herald/console/static``, served as they are.

They hold no data, so they are served without a key. The page asks for the admin key, keeps it
in the tab's session storage and sends it as a Bearer header to the same admin API the CLI
calls, where every request needs it. The headers keep the page to itself: only its own script
and stylesheet run (no inline script, no other origin), no frame may hold it, it sends no
referrer, and no form of it submits anywhere (a key typed before the script ran stays out of
any URL)."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from herald.errors import NotFound
from herald.http.described import NO_KEY, Answer, described

CONTENT_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
"""Every file the console has, and what it is: no other name is served."""

POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    # Asked again each time, answered 304 while unchanged: a new herald's console shows at once.
    "Cache-Control": "no-cache",
}


@dataclass(frozen=True)
class ConsoleFile:
    body: bytes
    content_type: str
    etag: str


@functools.cache
def console_file(name: str) -> ConsoleFile:
    body = resources.files("herald.console").joinpath("static", name).read_bytes()
    etag = f'"{hashlib.sha256(body).hexdigest()[:20]}"'
    return ConsoleFile(body, CONTENT_TYPES[name], etag)


@described(
    "The web console: a redirect to its page",
    keys=NO_KEY,
    answers={308: Answer("Go to console/ (relative, so that a proxy's path prefix is kept).")},
    uses_store=False,
    tag="console",
)
async def to_page(request: Request) -> Response:
    # Relative, so that the console works under a proxy's path prefix too.
    return RedirectResponse("console/", status_code=308)


@described(
    "The web console's page (it holds no data: it asks for the admin key and sends it)",
    keys=NO_KEY,
    answers={
        200: Answer("The page.", {"text/html": str}),
        304: Answer("Unchanged since the ETag sent in If-None-Match."),
    },
    uses_store=False,
    tag="console",
)
async def page(request: Request) -> Response:
    return _serve(request, "index.html")


@described(
    "One of the web console's files: its script, stylesheet or icon",
    keys=NO_KEY,
    answers={
        200: Answer("The file.", {"text/javascript": str, "text/css": str, "image/svg+xml": str}),
        304: Answer("Unchanged since the ETag sent in If-None-Match."),
    },
    errors=(404,),
    uses_store=False,
    tag="console",
)
async def asset(request: Request) -> Response:
    name = request.path_params["file"]
    if name not in CONTENT_TYPES or name == "index.html":
        raise NotFound(f"the console has no file {name!r}")
    return _serve(request, name)


def _serve(request: Request, name: str) -> Response:
    found = console_file(name)
    headers = {**HEADERS, "ETag": found.etag}
    if request.headers.get("if-none-match") == found.etag:
        return Response(status_code=304, headers=headers)
    return Response(found.body, media_type=found.content_type, headers=headers)


ROUTES = [
    Route("/console", to_page, methods=["GET"]),
    Route("/console/", page, methods=["GET"]),
    Route("/console/{file}", asset, methods=["GET"]),
]
