"""A fault-injecting TCP proxy to put in front of the API server in tests and benchmarks.

Clients connect to the proxy; it connects on to the upstream (optionally originating TLS with a
client certificate, so a client may speak plain HTTP to it and the proxy can read request lines).
Faults are switched at run time:

- connection modes, for every connection: `pass`, `delay` (each chunk held `delay` seconds),
  `drop` (FIN: live connections closed, new ones closed on accept), `reset` (RST: the same with
  SO_LINGER 0) and `blackhole` (nothing flows either way until the mode changes, as in a network
  partition; nothing is lost, a client that gives up closes its side);
- request rules (plain HTTP only): a `Rule` matches a method and a path pattern, e.g. PATCH/PUT of
  `workloads/.../status`, and resets, drops, blackholes or delays that request, before it reaches
  the server or (`forward=True`) after it was sent, so the write happens but its answer is lost.

`FaultProxy` lives on an asyncio loop; `ProxyThread` runs one on a loop of its own for synchronous
tests, and its switches take effect before they return.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import ssl
import struct
import threading
from collections import Counter
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from queuectl.testenv.kubeconfig import upstream_tls_from_kubeconfig

T = TypeVar("T")
CHUNK = 64 * 1024
HEAD_LIMIT = 1024 * 1024  # request line + headers; the API server's own limit is similar


class Mode(StrEnum):
    PASS = "pass"
    DELAY = "delay"
    DROP = "drop"
    RESET = "reset"
    BLACKHOLE = "blackhole"


@dataclass(frozen=True)
class Rule:
    """What to do to requests with one of `methods` whose path matches `path` (re.search).

    `forward=True` sends the request upstream first, then applies `action` to the connection,
    so the server acts on it but the client never hears the answer. `limit` bounds the hits.
    """

    action: Mode
    methods: frozenset[str]
    path: str
    delay: float = 0.0
    forward: bool = False
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.action is Mode.PASS:
            raise ValueError("a rule's action must be a fault: delay, drop, reset or blackhole")
        re.compile(self.path)

    def matches(self, method: str, target: str) -> bool:
        return method.upper() in self.methods and re.search(self.path, target) is not None


def status_writes(kind_plural: str, action: Mode, **kw: Any) -> Rule:
    """A rule for PATCH/PUT of `<plural>/<name>/status`: the controller's admission writes."""
    return Rule(action, frozenset({"PATCH", "PUT"}), rf"/{kind_plural}/[^/?]+/status(\?|$)", **kw)


class _Conn:
    """One client connection and its upstream."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.tasks: list[asyncio.Task[None]] = []

    def abort(self, rst: bool) -> None:
        for writer in (self.client, self.upstream):
            if writer is None:
                continue
            if rst:
                sock = writer.get_extra_info("socket")
                with contextlib.suppress(OSError, AttributeError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
            else:
                writer.close()
        for task in self.tasks:
            if task is not asyncio.current_task():
                task.cancel()


@dataclass
class Stats:
    """What the proxy did: connections seen and each fault it injected."""

    connections: int = 0
    faults: Counter[str] = field(default_factory=Counter)

    def total_faults(self) -> int:
        return sum(self.faults.values())


class FaultProxy:
    """Listens on `listen` and forwards to `upstream`; see the module docstring for the faults."""

    def __init__(
        self,
        upstream: tuple[str, int],
        *,
        listen: tuple[str, int] = ("127.0.0.1", 0),
        upstream_tls: ssl.SSLContext | None = None,
        http: bool | None = None,
    ) -> None:
        self.upstream = upstream
        self.listen = listen
        self.upstream_tls = upstream_tls
        self.http = upstream_tls is not None if http is None else http
        self.mode = Mode.PASS
        self.delay = 0.0
        self.rules: list[Rule] = []
        self._hits: Counter[int] = Counter()
        self.stats = Stats()
        self._conns: set[_Conn] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None, "not started"
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(
            self._serve, *self.listen, limit=HEAD_LIMIT, reuse_address=True
        )
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            conn.abort(rst=False)
        self._flowing.set()
        if self._server is not None:
            await self._server.wait_closed()

    # ---- switches ------------------------------------------------------------------------
    def set_mode(self, mode: Mode | str, delay: float = 0.0) -> None:
        """Switch every connection's fault; drop and reset also end the live connections."""
        self.mode = Mode(mode)
        self.delay = delay if self.mode is Mode.DELAY else 0.0
        if self.mode is Mode.BLACKHOLE:
            self._flowing.clear()
        else:
            self._flowing.set()
        if self.mode in (Mode.DROP, Mode.RESET):
            for conn in list(self._conns):
                self.stats.faults[str(self.mode)] += 1
                conn.abort(rst=self.mode is Mode.RESET)

    def set_rules(self, rules: Iterable[Rule]) -> None:
        if not self.http and rules:
            raise ValueError("request rules need a plain-HTTP client side (give upstream_tls)")
        self.rules = list(rules)
        self._hits.clear()

    # ---- connections ---------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(writer)
        self.stats.connections += 1
        if self.mode in (Mode.DROP, Mode.RESET):
            self.stats.faults[str(self.mode)] += 1
            conn.abort(rst=self.mode is Mode.RESET)
            return
        self._conns.add(conn)
        try:
            await self._flowing.wait()  # a blackholed connect goes nowhere until the mode heals
            up_reader, conn.upstream = await asyncio.open_connection(
                *self.upstream,
                ssl=self.upstream_tls,
                server_hostname=self.upstream[0] if self.upstream_tls else None,
                limit=HEAD_LIMIT,
            )
            up = self._pump(up_reader, writer, conn)
            down = (
                self._requests(reader, conn)
                if self.http
                else self._pump(reader, conn.upstream, conn)
            )
            conn.tasks = [asyncio.ensure_future(up), asyncio.ensure_future(down)]
            done, _ = await asyncio.wait(conn.tasks, return_when=asyncio.FIRST_COMPLETED)
            if conn.tasks[0] not in done and not conn.tasks[1].exception():
                await conn.tasks[0]  # the client finished sending: let the answer come back
        except (
            OSError,
            ValueError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            asyncio.CancelledError,
            ssl.SSLError,
        ):
            pass
        finally:
            self._conns.discard(conn)
            conn.abort(rst=False)

    async def _send(self, data: bytes, to: asyncio.StreamWriter) -> None:
        await self._flowing.wait()
        if self.mode is Mode.DELAY and self.delay > 0:
            self.stats.faults["delay"] += 1
            await asyncio.sleep(self.delay)
            await self._flowing.wait()
        to.write(data)
        await to.drain()

    async def _pump(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, conn: _Conn
    ) -> None:
        with contextlib.suppress(OSError, ssl.SSLError):
            while data := await src.read(CHUNK):
                await self._send(data, dst)
            if dst.can_write_eof():
                dst.write_eof()

    def _rule_for(self, method: str, target: str) -> Rule | None:
        for i, rule in enumerate(self.rules):
            if rule.matches(method, target) and (rule.limit is None or self._hits[i] < rule.limit):
                self._hits[i] += 1
                return rule
        return None

    async def _requests(self, src: asyncio.StreamReader, conn: _Conn) -> None:
        """Forward HTTP/1.1 requests one by one, applying the first matching rule to each."""
        assert conn.upstream is not None
        up = conn.upstream
        while True:
            try:
                head = await src.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as eof:
                if eof.partial:
                    await self._send(eof.partial, up)
                return
            method, target, headers = _parse_head(head)
            rule = self._rule_for(method, target)
            if rule is not None and rule.action is Mode.DELAY:
                self.stats.faults["rule:delay"] += 1
                await asyncio.sleep(rule.delay)
                rule = None
            if rule is not None and not rule.forward:
                await self._apply(rule, conn)
                return
            await self._send(head, up)
            if "upgrade" in headers.get("connection", "").lower():
                await self._pump(src, up, conn)  # after an upgrade it is not HTTP any more
                return
            await self._forward_body(src, up, headers)
            if rule is not None:
                await self._apply(rule, conn)
                return

    async def _apply(self, rule: Rule, conn: _Conn) -> None:
        self.stats.faults[f"rule:{rule.action}"] += 1
        if rule.action is Mode.BLACKHOLE:
            await asyncio.Event().wait()  # held until the client gives up (or close())
        conn.abort(rst=rule.action is Mode.RESET)

    async def _forward_body(
        self, src: asyncio.StreamReader, up: asyncio.StreamWriter, headers: dict[str, str]
    ) -> None:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                size_line = await src.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0].strip(), 16)
                await self._send(size_line, up)
                if size == 0:
                    while (line := await src.readuntil(b"\r\n")) != b"\r\n":
                        await self._send(line, up)  # trailers
                    await self._send(b"\r\n", up)
                    return
                await self._send(await src.readexactly(size + 2), up)
        remaining = int(headers.get("content-length", "0") or 0)
        while remaining > 0:
            data = await src.read(min(CHUNK, remaining))
            if not data:
                raise asyncio.IncompleteReadError(b"", remaining)
            remaining -= len(data)
            await self._send(data, up)


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    method, target = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return method, target, headers


# ---- running it beside synchronous code ------------------------------------------------------
class ProxyThread:
    """A `FaultProxy` on its own event loop in a daemon thread; every method is thread-safe."""

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="faultproxy", daemon=True
        )

    def _call(self, coro: Awaitable[T]) -> T:
        async def wrap() -> T:
            return await coro

        return asyncio.run_coroutine_threadsafe(wrap(), self.loop).result(timeout=30)

    def start(self) -> ProxyThread:
        self._thread.start()
        self._call(self.proxy.start())
        return self

    @property
    def address(self) -> tuple[str, int]:
        return self.proxy.address

    def set_mode(self, mode: Mode | str, delay: float = 0.0) -> None:
        async def switch() -> None:
            self.proxy.set_mode(mode, delay)

        self._call(switch())

    def set_rules(self, rules: Iterable[Rule]) -> None:
        chosen = list(rules)

        async def switch() -> None:
            self.proxy.set_rules(chosen)

        self._call(switch())

    def heal(self) -> None:
        """Back to a clean pass-through: no mode, no rules."""

        async def switch() -> None:
            self.proxy.set_rules([])
            self.proxy.set_mode(Mode.PASS)

        self._call(switch())

    def stats(self) -> Stats:
        async def snapshot() -> Stats:
            return Stats(self.proxy.stats.connections, Counter(self.proxy.stats.faults))

        return self._call(snapshot())

    def stop(self) -> None:
        if self._thread.is_alive():
            self._call(self.proxy.close())
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()

    def __enter__(self) -> ProxyThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def proxy_for_kubeconfig(kubeconfig: str | Path) -> ProxyThread:
    """A started proxy to the kubeconfig's API server that clients reach over plain HTTP."""
    upstream, tls = upstream_tls_from_kubeconfig(kubeconfig)
    return ProxyThread(FaultProxy(upstream, upstream_tls=tls)).start()
