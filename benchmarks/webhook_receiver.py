"""A fast local webhook receiver (a script, run as a subprocess): raw asyncio HTTP/1.1 with
keep-alive. ``/ok...`` answers 200, ``/fail...`` answers 500, ``/hang...`` never answers. Prints
its port on stdout once listening."""

from __future__ import annotations

import asyncio
import sys

OK = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
FAIL = b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n"


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length:
                await reader.readexactly(length)
            path = head.split(b" ", 2)[1]
            if path.startswith(b"/hang"):
                await asyncio.sleep(3600)
            writer.write(FAIL if path.startswith(b"/fail") else OK)
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
