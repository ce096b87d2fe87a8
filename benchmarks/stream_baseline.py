"""The bare SSE broadcast of the stream figures (a script, run as a subprocess like herald):
uvicorn (uvloop, httptools) and Starlette with no store. ``GET /channel/stream`` (the Bearer
token names the stream) holds an SSE stream fed by an asyncio queue; ``POST /publish {"to":
token or null, "seq": n, "data": {...}}`` frames ``id: n`` / ``data: <json>`` once and puts it
on that stream's queues, or on all of them when ``to`` is null. It prints
``stream-baseline: listening on http://HOST:PORT`` once it accepts connections."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import defaultdict
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from benchmarks.baseline_server import run

QUEUE_SIZE = 1000


def create_app() -> Starlette:
    queues: defaultdict[str, set[asyncio.Queue[bytes]]] = defaultdict(set)

    async def stream(request: Request) -> StreamingResponse:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        queue: asyncio.Queue[bytes] = asyncio.Queue(QUEUE_SIZE)
        queues[token].add(queue)

        async def body() -> AsyncIterator[bytes]:
            try:
                yield b"retry: 2000\n\n"
                while True:
                    yield await queue.get()
            finally:
                queues[token].discard(queue)

        return StreamingResponse(body(), media_type="text/event-stream")

    async def publish(request: Request) -> Response:
        message = json.loads(await request.body())
        data = json.dumps(message["data"], separators=(",", ":"))
        frame = f"id: {message['seq']}\ndata: {data}\n\n".encode()
        to = message.get("to")
        targets = [queues[to]] if to is not None else list(queues.values())
        for group in targets:
            for queue in group:
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(frame)
        return Response(status_code=202)

    routes = [
        Route("/channel/stream", stream, methods=["GET"]),
        Route("/publish", publish, methods=["POST"]),
    ]
    return Starlette(routes=routes)


def main() -> None:
    run(
        "stream-baseline",
        "The bare SSE broadcast of the benchmarks.",
        create_app,
        backlog=4096,
        grace_s=1,
    )


if __name__ == "__main__":
    main()
