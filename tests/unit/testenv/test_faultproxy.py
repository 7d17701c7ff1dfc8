"""The fault proxy: each mode and each request rule does what the fault suite relies on."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml
from aiohttp import web

from queuectl.testenv.faultproxy import (
    FaultProxy,
    Mode,
    ProxyThread,
    Rule,
    status_writes,
)
from queuectl.testenv.kubeconfig import upstream_tls_from_kubeconfig, write_proxied_kubeconfig

STATUS = "/apis/queuectl.io/v1beta1/namespaces/a/workloads/w/status"


# ---- an echo upstream (raw TCP) -----------------------------------------------------------
async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.CancelledError):
        while data := await reader.read(4096):
            writer.write(data)
            await writer.drain()
    writer.close()


@pytest.fixture
async def tcp_proxy() -> AsyncIterator[FaultProxy]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy = await FaultProxy(("127.0.0.1", port)).start()
    yield proxy
    await proxy.close()
    server.close()


async def _connect(proxy: FaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(*proxy.address)


async def _roundtrip(proxy: FaultProxy, data: bytes = b"ping") -> bytes:
    reader, writer = await _connect(proxy)
    writer.write(data)
    await writer.drain()
    got = await asyncio.wait_for(reader.readexactly(len(data)), 10)
    writer.close()
    return got


async def test_bytes_pass_unchanged(tcp_proxy: FaultProxy) -> None:
    assert await _roundtrip(tcp_proxy, b"x" * 200_000) == b"x" * 200_000
    assert tcp_proxy.stats.total_faults() == 0


async def test_reset_ends_live_connections_with_rst_and_refuses_new_ones(
    tcp_proxy: FaultProxy,
) -> None:
    reader, writer = await _connect(tcp_proxy)
    writer.write(b"a")
    assert await reader.readexactly(1) == b"a"
    tcp_proxy.set_mode(Mode.RESET)
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(reader.read(1), 10)
    with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
        await _roundtrip(tcp_proxy)
    assert tcp_proxy.stats.faults["reset"] == 2
    tcp_proxy.set_mode(Mode.PASS)
    assert await _roundtrip(tcp_proxy) == b"ping"


async def test_drop_closes_connections_cleanly(tcp_proxy: FaultProxy) -> None:
    reader, writer = await _connect(tcp_proxy)
    writer.write(b"a")
    assert await reader.readexactly(1) == b"a"
    tcp_proxy.set_mode(Mode.DROP)
    assert await asyncio.wait_for(reader.read(1), 10) == b""  # FIN, not RST
    r2, _ = await _connect(tcp_proxy)
    assert await asyncio.wait_for(r2.read(1), 10) == b""


async def test_blackhole_holds_everything_and_loses_nothing_when_healed(
    tcp_proxy: FaultProxy,
) -> None:
    reader, writer = await _connect(tcp_proxy)
    tcp_proxy.set_mode(Mode.BLACKHOLE)
    writer.write(b"held")
    new_reader, new_writer = await _connect(tcp_proxy)  # accepted, but goes nowhere
    new_writer.write(b"new")
    held = asyncio.ensure_future(reader.readexactly(4))
    done, _ = await asyncio.wait({held}, timeout=0.5)
    assert not done
    tcp_proxy.set_mode(Mode.PASS)
    assert await asyncio.wait_for(held, 10) == b"held"
    assert await asyncio.wait_for(new_reader.readexactly(3), 10) == b"new"


async def test_delay_holds_each_chunk_for_the_delay(tcp_proxy: FaultProxy) -> None:
    tcp_proxy.set_mode(Mode.DELAY, delay=0.3)
    started = time.monotonic()
    assert await _roundtrip(tcp_proxy) == b"ping"
    assert time.monotonic() - started >= 0.6  # there and back, each held
    assert tcp_proxy.stats.faults["delay"] >= 2


async def test_rules_need_plain_http(tcp_proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="plain-HTTP"):
        tcp_proxy.set_rules([status_writes("workloads", Mode.RESET)])


def test_a_rule_must_be_a_fault_and_a_valid_pattern() -> None:
    with pytest.raises(ValueError, match="must be a fault"):
        Rule(Mode.PASS, frozenset({"GET"}), "/")
    with pytest.raises(Exception, match=r"unterminated|missing"):
        Rule(Mode.RESET, frozenset({"GET"}), "(")


@pytest.mark.parametrize(
    ("method", "path", "hit"),
    [
        ("PATCH", STATUS, True),
        ("PUT", STATUS + "?fieldManager=queuectl", True),
        ("patch", STATUS, True),
        ("GET", STATUS, False),
        ("PATCH", "/apis/queuectl.io/v1beta1/namespaces/a/workloads/w", False),
        ("PATCH", "/apis/batch/v1/namespaces/a/jobs/w/status", False),
        ("PATCH", "/apis/queuectl.io/v1beta1/clusterqueues/workloads/status", False),
    ],
)
def test_status_writes_match_only_a_kinds_status_writes(method: str, path: str, hit: bool) -> None:
    rule = status_writes("workloads", Mode.RESET)
    assert rule.matches(method, path) is hit


# ---- an HTTP upstream, with request rules -------------------------------------------------
class Upstream:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, bytes]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.seen.append((request.method, request.path_qs, body))
        return web.json_response({"method": request.method, "size": len(body)})


@pytest.fixture
async def http_proxy() -> AsyncIterator[tuple[FaultProxy, Upstream, aiohttp.ClientSession]]:
    upstream = Upstream()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", upstream.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    proxy = await FaultProxy(("127.0.0.1", port), http=True).start()
    session = aiohttp.ClientSession(f"http://{proxy.address[0]}:{proxy.address[1]}")
    yield proxy, upstream, session
    await session.close()
    await proxy.close()
    await runner.cleanup()


Http = tuple[FaultProxy, Upstream, aiohttp.ClientSession]


async def test_a_reset_rule_fails_the_matching_write_before_the_server_sees_it(
    http_proxy: Http,
) -> None:
    proxy, upstream, session = http_proxy
    proxy.set_rules([status_writes("workloads", Mode.RESET, limit=1)])
    async with session.get("/apis/x") as r:  # other requests on the same connection pass
        assert r.status == 200
    with pytest.raises(aiohttp.ClientError):
        async with session.patch(STATUS, json={"status": {}}) as r:
            await r.read()
    assert [m for m, _, _ in upstream.seen] == ["GET"]
    async with session.patch(STATUS, json={"status": {}}) as r:  # the limit is spent
        assert r.status == 200
    assert proxy.stats.faults["rule:reset"] == 1


async def test_a_forwarded_rule_lets_the_write_happen_but_loses_its_answer(
    http_proxy: Http,
) -> None:
    proxy, upstream, session = http_proxy
    proxy.set_rules([status_writes("workloads", Mode.DROP, forward=True)])
    with pytest.raises(aiohttp.ClientError):
        async with session.patch(STATUS, data=b"x" * 100_000) as r:  # not retried: not idempotent
            await r.read()
    assert upstream.seen == [("PATCH", STATUS, b"x" * 100_000)]


async def test_a_blackhole_rule_makes_the_write_time_out(http_proxy: Http) -> None:
    proxy, upstream, session = http_proxy
    proxy.set_rules([status_writes("workloads", Mode.BLACKHOLE)])
    with pytest.raises(TimeoutError):
        async with session.patch(STATUS, json={}, timeout=aiohttp.ClientTimeout(total=0.5)) as r:
            await r.read()
    assert upstream.seen == []
    async with session.get("/healthz") as r:  # a fresh connection is served
        assert r.status == 200


async def test_chunked_bodies_are_forwarded_whole_request_by_request(http_proxy: Http) -> None:
    proxy, upstream, session = http_proxy
    proxy.set_rules([Rule(Mode.DELAY, frozenset({"POST"}), "^/slow", delay=0.01)])

    async def chunks() -> AsyncIterator[bytes]:
        for part in (b"abc", b"", b"defg" * 10_000):
            yield part

    async with session.post("/slow", data=chunks()) as r:
        assert (await r.json())["size"] == 3 + 40_000
    async with session.post("/fast", data=b"12") as r:
        assert (await r.json())["size"] == 2
    assert [p for _, p, _ in upstream.seen] == ["/slow", "/fast"]
    assert proxy.stats.faults["rule:delay"] == 1


# ---- beside synchronous code, and in front of a kubeconfig ---------------------------------
def _echo_server() -> socket.socket:
    srv = socket.create_server(("127.0.0.1", 0))

    def echo(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            while data := conn.recv(4096):
                conn.sendall(data)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                threading.Thread(target=echo, args=(srv.accept()[0],), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return srv


def test_the_thread_switches_modes_before_returning() -> None:
    srv = _echo_server()
    with ProxyThread(FaultProxy(srv.getsockname())) as proxy:
        with socket.create_connection(proxy.address, timeout=5) as sock:
            sock.sendall(b"hi")
            assert sock.recv(2) == b"hi"
            proxy.set_mode("reset")
            with pytest.raises(ConnectionResetError):
                sock.recv(1)
        proxy.heal()
        with socket.create_connection(proxy.address, timeout=5) as sock:
            sock.sendall(b"ok")
            assert sock.recv(2) == b"ok"
        assert proxy.stats().faults["reset"] == 1
    srv.close()


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {"server": server, "certificate-authority-data": "eA=="},
                    }
                ],
                "users": [
                    {
                        "name": "u",
                        "user": {"client-certificate-data": "eA==", "client-key-data": "eA=="},
                    }
                ],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def test_the_proxied_kubeconfig_points_at_the_proxy_in_plain_http(tmp_path: Path) -> None:
    src = _kubeconfig(tmp_path, "https://127.0.0.1:6443")
    out = write_proxied_kubeconfig(src, tmp_path / "proxied", ("127.0.0.1", 1234))
    config = yaml.safe_load(out.read_text())
    assert config["clusters"][0]["cluster"] == {"server": "http://127.0.0.1:1234"}
    assert config["users"][0]["user"] == {}
    assert config["current-context"] == "x"


def test_the_upstream_must_be_https_with_embedded_certificates(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must be https"):
        upstream_tls_from_kubeconfig(_kubeconfig(tmp_path, "http://127.0.0.1:8080"))
