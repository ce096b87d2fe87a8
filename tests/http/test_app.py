"""The app's routing: a path no route takes, and a method its path does not take, answered in
herald's shape by herald itself, on a real uvicorn server."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from starlette.routing import Match

from herald.http.app import create_app
from herald.hub import Hub
from tests.http.test_io import serving

pytestmark = pytest.mark.anyio


async def test_the_router_answers_404_and_405_in_heralds_shape_with_nothing_in_the_scope(
    tmp_path: Path,
) -> None:
    # The router served alone: no app puts itself in the scope (``scope["app"]``), which
    # Starlette's router needs to raise its 404 and 405 rather than answer them in plain text.
    app = create_app(Hub.from_url(f"sqlite:///{tmp_path / 'never-opened.db'}"))
    async with (
        serving(app.router) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client,
    ):
        missing = await client.get("/v2/nothing")
        wrong = await client.delete("/healthz")
        patched = await client.post("/v1/agents/agt_x")
    assert missing.status_code == 404
    assert missing.json() == {
        "error": {
            "code": "not_found",
            "message": "no route /v2/nothing; GET /docs describes every route",
        }
    }
    assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, HEAD"
    assert wrong.json() == {
        "error": {"code": "method_not_allowed", "message": "DELETE is not allowed on /healthz"}
    }
    # A path that three routes share: every method of each.
    assert patched.status_code == 405 and patched.headers["allow"] == "DELETE, GET, HEAD, PATCH"
    assert patched.json()["error"]["code"] == "method_not_allowed"


def test_no_path_of_the_app_takes_a_request_for_another(tmp_path: Path) -> None:
    # The router serves one route per path and that route decides the method: were a request
    # for one path taken by another, the method of the other would be refused. (A path may
    # match a wider one, `/v1/topics/{topic:path}/subscribers`, if it comes first.)
    app = create_app(Hub.from_url(f"sqlite:///{tmp_path / 'never-opened.db'}"))
    taken_by_others = {}
    for route in app.routes:
        path = re.sub(r"\{\w+(:\w+)?\}", "x", route.path)
        scope = {"type": "http", "method": "GET", "path": path}
        takers = [
            served.path
            for served in app.router.routes
            if served.matches(scope)[0] is not Match.NONE
        ]
        if takers[:1] != [route.path]:
            taken_by_others[scope["path"]] = takers
    assert taken_by_others == {}
