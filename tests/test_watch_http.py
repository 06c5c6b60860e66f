"""tw watch's /metrics server, for real on 127.0.0.1 (and ::1): what any local user can do to
it, and what one hostile row of the state does to a scrape.

Why it can break: a server that starts a thread per connection with no cap (prometheus_client's
start_http_server: 1000 idle half-open connections made 1004 threads, and the next scrape timed
out), a client that never finishes its request and holds a slot for ever, a collector that
raises on one row (a program name stored as a BLOB, an integer name beside text names, a text
first_seen: every scrape answered 500 for the watch's life), HEAD answered 405, a request
whose lines end in a bare LF held until its timeout, an IPv6 address printed without its
brackets.  The live tests skip for need_watch's facts (not root,
no BTF or tracefs); the IPv6 one also when this machine has no ::1.
"""
import gzip
import os
import resource
import socket
import sys
import time
import urllib.request

import pytest

from conftest import ROOT, need_watch
from twtools.analyse import watch as analyse
from twtools.present import metricsserver
from twtools.present import watch as present

pytest.importorskip("prometheus_client")


def _state_with_hostile_rows():
    s = analyse.State()
    s.programs[("/usr/bin/ok32", True)] = {"execs": 3, "first": 1000.0, "last": 1001.0}
    s.programs[(b"/tmp/blob\xff", True)] = {"execs": 1, "first": 1000.0, "last": 1000.0}
    s.programs[(12345, False)] = {"execs": 2, "first": 1000.0, "last": 1002.0}
    s.programs[("/tmp/textfirst", False)] = {"execs": 1, "first": "yesterday", "last": b"x"}
    s.programs[("/tmp/negative", False)] = {"execs": -5, "first": 1.0, "last": float("inf")}
    s.calls[(b"/tmp/blob\xff", True, "compat_int80_text")] = 7
    s.calls[("/usr/bin/ok32", True, "compat_vdso")] = "many"
    s.cost[(7, True, "compat_vdso")] = {"median": "x", "ci_low": 0, "ci_high": 1}
    s.folded[(b"cap", True)] = 2
    s.started = "a while ago"
    return s


def _snapshot(s):
    return lambda: {"programs": s.programs, "folded": s.folded, "calls": s.calls, "cost": s.cost,
                    "wlat": s.wlat, "windows": s.windows, "intervals": s.intervals,
                    "max_programs": s.max_programs, "started": s.started, "share": 0.01}


@pytest.fixture
def server():
    srv = metricsserver.serve("127.0.0.1", 0, present.registry(_snapshot(_state_with_hostile_rows())),
                              timeout=2.0)
    try:
        yield srv
    finally:
        srv.close()


def _get(srv, method="GET", path="/metrics", headers=None, timeout=5):
    req = urllib.request.Request(f"http://127.0.0.1:{srv.address[1]}{path}", method=method,
                                 headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, dict(r.headers), r.read()


def test_hostile_rows_do_not_break_the_scrape(server):
    from prometheus_client.parser import text_string_to_metric_families
    code, _, body = _get(server)
    assert code == 200
    fams = {f.name: f for f in text_string_to_metric_families(body.decode())}
    execs = {(x.labels["program"], x.labels["bits"]): x.value
             for x in fams["timewrite_exec"].samples if x.name.endswith("_total")}
    assert execs[("/usr/bin/ok32", "32")] == 3
    assert execs[("/tmp/blob\\xff", "32")] == 1             # a BLOB shown as escape.name keeps it
    assert execs[("12345", "64")] == 2
    assert ("/tmp/negative", "64") not in execs               # never a negative count
    firsts = {x.labels["program"] for x in fams["timewrite_exec_first_seen_timestamp_seconds"].samples}
    assert "/tmp/textfirst" not in firsts and "/usr/bin/ok32" in firsts
    calls = {x.labels["program"]: x.value for x in fams["timewrite_syscalls"].samples
             if x.name.endswith("_total")}
    assert calls == {"/tmp/blob\\xff": 7}
    assert "timewrite_watch_intervals" in fams


def test_head_answers_200_without_a_body_and_gzip_is_honoured(server):
    code, headers, body = _get(server, "HEAD")
    assert code == 200 and body == b"" and int(headers["Content-Length"]) > 0
    code, headers, body = _get(server, headers={"Accept-Encoding": "gzip"})
    assert headers.get("Content-Encoding") == "gzip"
    assert b"timewrite_exec_total" in gzip.decompress(body)


def _raw(srv, data, timeout=5):
    with socket.create_connection(("127.0.0.1", srv.address[1]), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                return out
            out += b


@pytest.mark.parametrize("data,code", [
    (b"POST /metrics HTTP/1.1\r\n\r\n", b"405"),
    (b"GET /../../etc/passwd HTTP/1.1\r\n\r\n", b"404"),
    (b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\n\r\n", b"414"),
    (b"GET /metrics HTTP/1.1\r\n" + b"X: " + b"y" * 200000 + b"\r\n\r\n", b"431"),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", b"400"),
])
def test_odd_requests_get_a_status_not_a_hang(server, data, code):
    assert _raw(server, data).split(b" ", 2)[1] == code


@pytest.mark.parametrize("data", [b"GET /metrics HTTP/1.0\n\n",
                                  b"GET /metrics HTTP/1.1\nHost: x\nAccept-Encoding: gzip\n\n",
                                  b"GET /metrics HTTP/1.1\r\nHost: x\n\r\n"],
                         ids=["bare-LF", "bare-LF-headers", "mixed"])
def test_a_request_with_bare_lf_line_ends_is_answered(server, data):
    """`printf 'GET /metrics HTTP/1.0\\n\\n' | nc` ends its lines with a bare LF: it was held
    until the client's timeout, then closed without an answer."""
    out = _raw(server, data)
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), out[:200]
    if b"gzip" in data:
        assert b"Content-Encoding: gzip" in head and b"timewrite_exec_total" in gzip.decompress(body)
    else:
        assert b"timewrite_exec_total" in body


def _until(cond, guard_s=30):
    """Waits until cond() holds; guard_s is a hang guard only (the claim is that it comes to
    hold), generous for a loaded machine."""
    end = time.monotonic() + guard_s
    while not cond():
        assert time.monotonic() < end, f"still not so after {guard_s} s"
        time.sleep(0.05)


def _let_go(s):
    """Whether the server has closed this connection (as it does to make room)."""
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:                                 # reset: closed with the request unread
        return True


def test_a_thousand_idle_connections_do_not_stop_a_scrape():
    """1000 connections that never finish a request (half of them having sent half a request
    line), each accepted before the scrape: the server holds a bounded number, its threads do
    not grow, and the scrape is answered while the ones it holds are still open.  No client
    timeout can free a slot meanwhile (the server's is an hour here; the scrape's own 30 s is
    a hang guard, not the claim), so the crowd cannot starve it.  Once the client timeout is
    short, the idle ones are closed."""
    srv = metricsserver.serve("127.0.0.1", 0,
                              present.registry(_snapshot(_state_with_hostile_rows())),
                              timeout=3600.0)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    threads0 = len(os.listdir(f"/proc/{os.getpid()}/task"))
    idle = []
    try:
        for i in range(1000):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", srv.address[1]))
            if i % 2:
                try:
                    s.send(b"GET /met")
                except OSError:
                    pass
            idle.append(s)
            if len(idle) % 100 == 0:
                # this hundred is in (fewer than the listen backlog, so none waits for a
                # retransmitted handshake): each one the server accepted is held or let go
                _until(lambda: sum(map(_let_go, idle)) + len(srv.clients) >= len(idle))
        code, _, body = _get(srv, timeout=30)
        assert code == 200 and b"timewrite_exec_total" in body
        assert len(os.listdir(f"/proc/{os.getpid()}/task")) <= threads0
        assert len(srv.clients) <= metricsserver.MAX_CLIENTS
        assert sum(not _let_go(s) for s in idle) >= metricsserver.MAX_CLIENTS - 1
        srv.timeout = 0.5                           # now the idle ones are past it
        _until(lambda: len(srv.clients) == 0)
    finally:
        for s in idle:
            s.close()
        srv.close()


def test_a_client_that_never_reads_is_let_go(server):
    """A client that sends its request and never reads the answer holds its slot only until
    the server's client timeout: the server reads the request and answers, holds the
    connection while the client keeps it open, then lets it go by its own clock and goes on
    answering.  Shown in the server's own state, in that order; the waits are hang guards.
    The timeout is an hour until the answer is seen held, so that no clock decides whether
    that moment is seen, then 0.2 s."""
    server.timeout = 3600.0
    s = socket.create_connection(("127.0.0.1", server.address[1]))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
    try:
        # read and answered (or answering): nothing but its timeout lets it go from here
        _until(lambda: any(c.out is not None for c in list(server.clients.values())))
        assert len(server.clients) == 1               # held while the client keeps it open
        server.timeout = 0.2
        _until(lambda: len(server.clients) == 0)
        # the server closed its end: the client, reading at last, meets the end of the stream
        s.settimeout(60)                            # a hang guard
        try:
            while s.recv(65536):
                pass
        except ConnectionResetError:
            pass
        assert _get(server)[0] == 200
    finally:
        s.close()


# ---------------------------------------------------------------- through tw watch

def _watch(state, listen, *extra):
    import subprocess
    log = state / "watch.err"
    p = subprocess.Popen([sys.executable, ROOT / "scripts" / "tw", "watch", "--state", state,
                          "--listen", listen, "--interval", "1", "--window", "0", *extra],
                         stdout=subprocess.DEVNULL, stderr=open(log, "w"),
                         start_new_session=True)
    return p, log


def _wait_line(p, log, needle, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        text = log.read_text(errors="replace")
        if needle in text:
            return text
        if p.poll() is not None:
            pytest.fail(f"tw watch exited ({p.returncode}): {text[-2000:]}")
        time.sleep(0.2)
    pytest.fail(f"tw watch never said {needle!r}: {log.read_text(errors='replace')[-2000:]}")


def test_a_scrape_that_has_not_sent_yet_is_not_let_go_for_a_crowd_behind_it():
    """A scrape whose connection is accepted before its request arrives (its process not yet
    run again, on a loaded machine), then a crowd of idle connections behind it: taking the
    oldest silent connection to make room let the scrape go once MAX_CLIENTS more had come
    (the live thousand-connections test failed one run in eight beside two busy loops).  A
    silent connection is let go oldest first only once past its grace (an hour here, so no
    timing decides this test); before that the newest goes, and the scrape is answered."""
    srv = metricsserver.serve("127.0.0.1", 0,
                              present.registry(_snapshot(_state_with_hostile_rows())),
                              timeout=3600.0, grace=3600.0)
    idle = []
    scrape = socket.create_connection(("127.0.0.1", srv.address[1]), timeout=30)
    scrape.setblocking(False)
    try:
        _until(lambda: len(srv.clients) == 1)
        for _ in range(2 * metricsserver.MAX_CLIENTS):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", srv.address[1]))
            idle.append(s)
        # every connection accepted: held, or let go to make room
        _until(lambda: sum(map(_let_go, idle + [scrape])) + len(srv.clients) >= len(idle) + 1)
        assert not _let_go(scrape), "the server let the silent scrape go for the crowd behind it"
        assert len(srv.clients) == metricsserver.MAX_CLIENTS
        scrape.settimeout(30)
        scrape.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            part = scrape.recv(65536)
            assert part, f"the server let the scrape go: {got[:200]!r}"
            got += part
        assert got.startswith(b"HTTP/1.1 200 ")
    finally:
        scrape.close()
        for s in idle:
            s.close()
        srv.close()


def _accept_queue(port):
    """How many connections to 127.0.0.1:port wait in the kernel for the server's accept():
    the listening socket's rx_queue in /proc/net/tcp."""
    with open("/proc/net/tcp") as f:
        for line in f.read().splitlines()[1:]:
            fields = line.split()
            if fields[1] == f"0100007F:{port:04X}" and fields[3] == "0A":      # LISTEN
                return int(fields[4].split(":")[1], 16)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


def _connected(s):
    try:
        s.getpeername()
        return True
    except OSError:                                 # still in its handshake (or reset)
        return False


def test_the_watch_holds_a_thousand_idle_connections(tmp_path):
    """tw watch itself, 1000 idle connections at once: once the kernel has handed the server
    every one of them (each connected or let go, none waiting for accept()), the watch holds
    at most MAX_CLIENTS, runs a bounded number of threads, and answers the scrape that comes
    after the crowd.  Order, not a clock, decides: a scrape that raced the crowd's
    retransmitted handshakes on a loaded machine could be let go (one attempt in 40, beside
    three busy loops), which no bounded server can avoid (metricsserver.Server._to_let_go);
    behind a settled crowd it is the newest connection and is never the one let go.  The
    waits are hang guards."""
    import signal
    from test_watch_live import free_port
    need_watch()
    port = free_port()
    p, log = _watch(tmp_path, f"127.0.0.1:{port}")
    idle = []
    try:
        _wait_line(p, log, "counting every exec")
        for i in range(1000):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            idle.append(s)
            if len(idle) % 100 == 0:
                # this hundred has settled (fewer than the listen backlog, so no handshake
                # waits for a retransmission): every one connected or let go, and none left
                # waiting for the watch's accept()
                _until(lambda: all(_let_go(s) or _connected(s) for s in idle) and
                       _accept_queue(port) == 0)
        held = sum(not _let_go(s) for s in idle)
        assert held <= metricsserver.MAX_CLIENTS, f"the watch holds {held} idle connections"
        threads = len(os.listdir(f"/proc/{p.pid}/task"))
        assert threads < 20, f"{threads} threads in the watch with 1000 idle connections"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
            assert r.status == 200 and b"timewrite_exec_total" in r.read()
    finally:
        for s in idle:
            s.close()
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=120) == 0


def test_an_ipv6_listen_address_is_printed_in_brackets(tmp_path):
    import signal
    from test_watch_live import free_port
    need_watch()
    if not socket.has_ipv6 or not os.path.exists("/proc/net/if_inet6") or \
            "00000000000000000000000000000001" not in open("/proc/net/if_inet6").read():
        pytest.skip("this machine has no ::1")
    port = free_port()
    p, log = _watch(tmp_path, f"[::1]:{port}")
    try:
        text = _wait_line(p, log, "counting every exec")
        assert f"http://[::1]:{port}/metrics" in text, text
        with urllib.request.urlopen(f"http://[::1]:{port}/metrics", timeout=5) as r:
            assert r.status == 200
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=120) == 0
