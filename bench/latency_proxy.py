"""A TCP proxy on 127.0.0.1 that holds every byte for half a round trip in each direction, so a
benchmark on one machine sees a hub as far away as the Hugging Face Hub is (a cold load's time is
then mostly its round trips). Bandwidth is not limited; a new connection pays one round trip
before its first byte, as TCP's handshake does.

    with LatencyProxy("127.0.0.1", 8000, rtt_ms=50) as proxy:
        url = proxy.url   # http://127.0.0.1:<port>, for HF_ENDPOINT / KBUILD_HUB
"""

from __future__ import annotations

import asyncio
import threading
import time


class LatencyProxy:
    def __init__(self, host: str, port: int, rtt_ms: float):
        self.target = (host, port)
        self.delay = rtt_ms / 2000  # seconds, each way
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="latency-proxy", daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LatencyProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the latency proxy did not start")
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _close(self) -> None:
        """Stops listening and ends every connection still open (a kept-alive client's)."""
        self._server.close()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        server_w = None
        try:
            await asyncio.sleep(2 * self.delay)  # the handshake's round trip
            server_r, server_w = await asyncio.open_connection(*self.target)
            await asyncio.gather(self._pump(client_r, server_w), self._pump(server_r, client_w))
        except OSError:
            pass
        finally:
            for writer in (client_w, server_w):
                if writer is not None:
                    writer.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copies reader to writer, each chunk written `delay` after it was read, in order; chunks
        in flight overlap, so a long body streams at full speed once its first byte arrived."""
        queue: asyncio.Queue = asyncio.Queue()
        sender = asyncio.ensure_future(self._deliver(queue, writer))
        try:
            while data := await reader.read(1 << 16):
                queue.put_nowait((time.monotonic() + self.delay, data))
        except OSError:  # the peer reset the connection: what was read is still delivered
            pass
        queue.put_nowait(None)
        await sender

    async def _deliver(self, queue: asyncio.Queue, writer: asyncio.StreamWriter) -> None:
        try:
            while (item := await queue.get()) is not None:
                due, data = item
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                writer.write(data)
                await writer.drain()
            await asyncio.sleep(self.delay)  # the end of the stream travels too
            if writer.can_write_eof():
                writer.write_eof()
        except OSError:
            pass
