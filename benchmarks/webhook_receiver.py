"""A fast local webhook receiver (a script, run as a subprocess): raw asyncio HTTP/1.1 with
keep-alive. ``/ok...`` answers 200, ``/fail...`` answers 500, ``/hang...`` never answers. An MCP
Events verification (``{"type":"verification","challenge":...}``) is answered 200 with
``{"challenge": ...}``, as ``events/subscribe`` requires. Prints its port on stdout once
listening."""

from __future__ import annotations

import asyncio
import json
import sys

OK = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
FAIL = b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n"
VERIFICATION = b'{"type":"verification"'
"""How herald's challenge body starts (compact JSON): only such bodies are parsed."""


def _echo(body: bytes) -> bytes:
    """The answer to a verification challenge: 200 with the challenge echoed."""
    answer = json.dumps({"challenge": json.loads(body)["challenge"]}).encode()
    head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(answer)}"
    return head.encode() + b"\r\n\r\n" + answer


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length) if length else b""
            path = head.split(b" ", 2)[1]
            if path.startswith(b"/hang"):
                await asyncio.sleep(3600)
            if path.startswith(b"/fail"):
                writer.write(FAIL)
            else:
                writer.write(_echo(body) if body.startswith(VERIFICATION) else OK)
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def _main() -> None:
    server = await asyncio.start_server(_serve, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.run(_main())
    except KeyboardInterrupt:
        sys.exit(0)
