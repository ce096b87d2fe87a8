"""The bare endpoint (a script, run as a subprocess like herald): the durable work of herald's
publish and drain on the same stack, with nothing else. uvicorn (uvloop, httptools) and
Starlette; ``json.loads`` of the body; each agent's seqs reserved and the events inserted, or a
drain step, by one writer that commits concurrent requests together (``bare_sqlite``: a thread,
WAL + synchronous=FULL; ``bare_postgres``: an asyncpg task).

- ``POST /v1/events``: an object publishes one event, an array a batch (``to``, ``type``,
  ``text``, ``data``); answers a receipt, or ``{"events": [receipts]}``, 202.
- ``POST /channel/heartbeat {"cursor", "limit"}``, the Bearer token naming the agent:
  acknowledges its events up to the cursor, leases the next ``limit`` and answers them,
  ``{"events": [...], "cursor": n}``.
- ``POST /v1/agents {"handle"}``: makes an agent; its key (``api_key``) is its handle.

No keys are checked, nothing is validated, nothing is counted or journaled. It prints
``bare: listening on http://HOST:PORT`` once it accepts connections.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from benchmarks.bare_postgres import PostgresStore
from benchmarks.bare_sqlite import SqliteStore
from benchmarks.bare_work import Drain, Publish, drained
from benchmarks.baseline_server import parser, serve

JSON = "application/json"


def create_app(store: SqliteStore | PostgresStore) -> Starlette:
    async def publish(request: Request) -> Response:
        body = json.loads(await request.body())
        events = body if isinstance(body, list) else [body]
        work = Publish(events, int(time.time() * 1000))
        await store.publish(work)
        answer = {"events": work.receipts} if isinstance(body, list) else work.receipts[0]
        return Response(json.dumps(answer), 202, media_type=JSON)

    async def heartbeat(request: Request) -> Response:
        body = json.loads(await request.body())
        handle = request.headers["authorization"].removeprefix("Bearer ")
        cursor = body.get("cursor") or 0
        step = Drain(handle, cursor, body.get("limit", 100), "default", int(time.time() * 1000))
        rows = await store.drain(step)
        return Response(json.dumps(drained(rows, cursor)), 200, media_type=JSON)

    async def create_agent(request: Request) -> Response:
        handle = json.loads(await request.body())["handle"]
        await store.create_agent(f"agt_{handle}", handle)
        return Response(json.dumps({"api_key": handle}), 201, media_type=JSON)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await store.open()
        try:
            yield
        finally:
            await store.close()

    routes = [
        Route("/v1/events", publish, methods=["POST"]),
        Route("/channel/heartbeat", heartbeat, methods=["POST"]),
        Route("/v1/agents", create_agent, methods=["POST"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    command = parser("The bare publish and drain endpoint of the benchmarks.")
    command.add_argument("--store", required=True, help="sqlite:///PATH or postgresql://...")
    args = command.parse_args()
    if args.store.startswith("sqlite:///"):
        store: SqliteStore | PostgresStore = SqliteStore(args.store.removeprefix("sqlite:///"))
    else:
        store = PostgresStore(args.store)
    serve("bare", create_app(store), args.host, args.port, backlog=1024)


if __name__ == "__main__":
    main()
