"""The HTTP server of `tw watch --listen`: /metrics, bounded whatever the clients do.

prometheus_client's start_http_server starts one thread per connection with no cap and a
listen backlog of 5: 1000 idle half-open connections made 1004 threads, and a scrape that came
after them timed out.  This server is one thread and one selector:

  - at most MAX_CLIENTS connections are held; past that, one that has sent nothing (nothing
    read, nothing waiting in its socket) is closed to make room: the oldest past GRACE_S,
    else the newest, so that a scrape arriving behind or amid a crowd of idle connections is
    still read (each is accepted, in the kernel's order, and the idle ones around it are let
    go); failing that, the oldest one that has not sent a whole request;
  - a connection gets CLIENT_TIMEOUT_S to send its request and read the answer, then is
    closed; a request's lines may end in CRLF or in a bare LF;
  - a request line longer than MAX_URL is answered 414, a header block longer than
    MAX_HEADERS 431, a request that is not HTTP (a TLS handshake) 400, a method other than
    GET or HEAD 405, a path other than /metrics (or /) 404;
  - GET /metrics answers the exposition (text format, or OpenMetrics when asked, gzip when
    accepted, as prometheus_client's own server does); HEAD the same headers, no body.

One answer per connection (Connection: close): Prometheus opens a new one per scrape anyway.
The exposition is made in this thread, so a slow one delays the others; it is the watch's
bounded state (analyse.watch.State's caps) that bounds it.
"""
import gzip
import re
import selectors
import socket
import threading
import time

MAX_CLIENTS = 32
# A connection this young that has sent nothing is let go to make room only when no older
# silent one is left (Server._to_let_go).
GRACE_S = 1.0
CLIENT_TIMEOUT_S = 10.0
MAX_URL = 2048
MAX_HEADERS = 16384
BACKLOG = 128

# The end of the request's head: an empty line, after CRLF or bare LF line ends.
_HEAD_END = re.compile(rb"\r?\n\r?\n")

_REASON = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           414: "URI Too Long", 431: "Request Header Fields Too Large",
           500: "Internal Server Error"}


def _answer(code, body=b"", ctype="text/plain; charset=utf-8", extra=(), head=False):
    lines = [f"HTTP/1.1 {code} {_REASON[code]}", f"Content-Type: {ctype}",
             f"Content-Length: {len(body)}", "Connection: close", *extra]
    if code == 405:
        lines.append("Allow: GET, HEAD")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (b"" if head else body)


class _Client:
    def __init__(self, sock, now):
        self.sock, self.t0 = sock, now
        self.inbuf, self.out = b"", None       # out: bytes left to send once answered
        self.done = False                       # answered: what it still sends is read and dropped


class Server:
    """serve(host, port, registry): listening and answering in a daemon thread; close() ends
    it.  OSError when the address cannot be bound."""

    def __init__(self, host, port, registry, max_clients=MAX_CLIENTS, timeout=CLIENT_TIMEOUT_S,
                 grace=GRACE_S):
        self.registry, self.max_clients, self.timeout = registry, max_clients, timeout
        self.grace = grace
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(fam, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((host, port))
            self.sock.listen(BACKLOG)
            self.sock.setblocking(False)
        except OSError:
            self.sock.close()
            raise
        self.address = self.sock.getsockname()[:2]
        self.clients = {}                       # fd -> _Client, oldest first
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.sock, selectors.EVENT_READ)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True, name="watch-http")
        self.thread.start()

    # ---- the loop
    def _loop(self):
        try:
            while not self._stop.is_set():
                for key, events in self.sel.select(timeout=0.5):
                    if key.fileobj is self.sock:
                        self._accept()
                    else:
                        self._serve(key.fileobj, events)
                self._expire()
        finally:
            for c in list(self.clients.values()):
                self._drop(c)
            self.sel.close()
            self.sock.close()

    def _accept(self):
        while True:
            try:
                s, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:                     # EMFILE, ECONNABORTED: try at the next event
                return
            s.setblocking(False)
            if len(self.clients) >= self.max_clients:
                idle = self._to_let_go(time.monotonic())
                if idle is None:                # all answering: the newcomer waits no longer
                    s.close()
                    continue
                self._drop(idle)
            c = _Client(s, time.monotonic())
            self.clients[s.fileno()] = c
            self.sel.register(s, selectors.EVENT_READ)

    def _to_let_go(self, now):
        """The connection closed to make room for a newcomer: of those that have sent nothing,
        the oldest one past GRACE_S, else the newest; else the oldest one that has not sent a
        whole request; None when every one is being answered.

        A scrape accepted a moment ago may not have sent its request yet (its process not
        yet run again on a loaded machine), and the accepts of one event outrun the reads:
        taking the oldest silent one let such a scrape go once MAX_CLIENTS idle connections
        were accepted after it (one run in eight of the thousand-connections test, beside two
        busy loops on a 2-core guest).  A crowd arriving at once now churns among its newest
        members, and the ones that came a moment earlier keep their grace."""
        silent = [c for c in self.clients.values() if self._silent(c)]
        if silent:
            old = [c for c in silent if now - c.t0 >= self.grace]
            return old[0] if old else silent[-1]
        return next((c for c in self.clients.values() if c.out is None or c.done), None)

    @staticmethod
    def _silent(c):
        """Whether a client has sent nothing: no bytes read, none waiting (a closed one too)."""
        if c.inbuf or c.out is not None:
            return False
        try:
            return not c.sock.recv(1, socket.MSG_PEEK)
        except OSError:         # nothing waiting (EAGAIN), or the connection is gone
            return True

    def _drop(self, c):
        self.clients.pop(c.sock.fileno(), None)
        try:
            self.sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()

    def _expire(self):
        now = time.monotonic()
        for c in [c for c in self.clients.values() if now - c.t0 > self.timeout]:
            self._drop(c)

    def _serve(self, sock, events):
        c = self.clients.get(sock.fileno())
        if c is None:
            return
        if c.done:
            # Answered and shut for writing: what the client still sends (the rest of an
            # oversized request) is read and dropped until it closes, so that closing with
            # unread bytes does not reset the connection before it reads the answer.
            try:
                if sock.recv(65536):
                    return
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                pass
            return self._drop(c)
        if c.out is None and events & selectors.EVENT_READ:
            try:
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return self._drop(c)
            if not data:
                return self._drop(c)
            c.inbuf += data
            out = self._request(c.inbuf)
            if out is None:
                return
            c.out = out
            self.sel.modify(sock, selectors.EVENT_WRITE)
        if c.out is not None:
            try:
                n = sock.send(c.out)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return self._drop(c)
            c.out = c.out[n:]
            if not c.out:
                try:
                    sock.shutdown(socket.SHUT_WR)
                except OSError:
                    return self._drop(c)
                c.done = True
                self.sel.modify(sock, selectors.EVENT_READ)

    # ---- one request
    def _request(self, buf):
        """The answer's bytes, or None while the request is incomplete.  Lines may end in CRLF
        or in a bare LF (RFC 9112 lets a server take a bare LF as a line end; a client that
        sends them, `printf 'GET /metrics HTTP/1.0\\n\\n' | nc`, was held until its timeout)."""
        m = _HEAD_END.search(buf)
        end = m.start() if m else -1
        line_end = buf.find(b"\n")
        first = buf[:line_end if line_end >= 0 else len(buf)].rstrip(b"\r")
        if len(first) > MAX_URL + 32:
            return _answer(414, b"request line too long\n")
        if end < 0:
            if len(buf) > MAX_HEADERS:
                return _answer(431, b"headers too long\n")
            if line_end < 0 and buf and not buf[:1].isalpha():
                return _answer(400, b"not an HTTP request\n")     # a TLS handshake
            return None
        if end > MAX_HEADERS:
            return _answer(431, b"headers too long\n")
        try:
            head = [ln.rstrip("\r") for ln in buf[:end].decode("latin-1").split("\n")]
            method, target, version = head[0].split(" ")
        except ValueError:
            return _answer(400, b"not an HTTP request\n")
        if not version.startswith("HTTP/"):
            return _answer(400, b"not an HTTP request\n")
        if len(target) > MAX_URL:
            return _answer(414, b"request line too long\n")
        if method not in ("GET", "HEAD"):
            return _answer(405, b"GET or HEAD /metrics\n")
        if target.split("?", 1)[0] not in ("/metrics", "/"):
            return _answer(404, b"see /metrics\n", head=method == "HEAD")
        headers = {}
        for ln in head[1:]:
            k, _, v = ln.partition(":")
            headers[k.strip().lower()] = v.strip()
        return self._metrics(headers, method == "HEAD")

    def _metrics(self, headers, head):
        from prometheus_client.exposition import choose_encoder, gzip_accepted
        try:
            encoder, ctype = choose_encoder(headers.get("accept", ""))
            body = encoder(self.registry)
        except Exception as e:                  # said to the scraper, the watch goes on
            return _answer(500, f"the exposition failed: {type(e).__name__}\n".encode(),
                           head=head)
        extra = []
        if gzip_accepted(headers.get("accept-encoding", "")):
            body = gzip.compress(body)
            extra.append("Content-Encoding: gzip")
        return _answer(200, body, ctype, extra, head=head)

    def close(self):
        self._stop.set()
        self.thread.join(timeout=5)


def serve(host, port, registry, **kw):
    return Server(host, port, registry, **kw)
