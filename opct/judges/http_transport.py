"""One HTTP attempt held to a deadline as a whole, and the wait a server's ``Retry-After`` asks for.

``timeout`` bounds one attempt from connecting to the last byte of the answer: a watchdog shuts the
connection's socket down at the deadline, so a server that sends its answer byte by byte cannot hold it
longer (httpx's own timeouts apply to each read alone).
"""

from __future__ import annotations

import contextlib
import datetime
import email.utils
import math
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx


class _Deadline:
    """A watchdog for one attempt: at ``seconds`` it shuts down every socket the attempt opened (reads
    then fail at once), so the socket timeout, which applies to each read alone, cannot be stretched by
    a server that keeps sending a byte at a time."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down at the deadline (at once if it has passed)."""
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _cut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _cut(sock)

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's ``trace`` extension: every connection the attempt opens is watched once connected."""
        if event == "connection.connect_tcp.complete" and info.get("return_value") is not None:
            sock = info["return_value"].get_extra_info("socket")
            if sock is not None:
                self.watch(sock)


def _cut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError, ValueError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's: also under TLS, from another thread


def send(client: httpx.Client, url: str, body: bytes, headers: Mapping[str, str],
         seconds: float) -> tuple[int, httpx.Headers, bytes]:
    """``(status, headers, body)`` of the answer to ``POST url``, all of it (connect, send, every byte of the
    answer) within ``seconds``, or :class:`TimeoutError`. HTTP error statuses are returned, not raised; a
    connection that fails raises :class:`httpx.TransportError` or :class:`OSError`."""
    deadline = _Deadline(seconds)
    try:
        with deadline, client.stream("POST", url, content=body, headers=dict(headers), timeout=seconds,
                                     extensions={"trace": deadline.trace}) as resp:
            status, answer_headers, answer = resp.status_code, resp.headers, resp.read()
    except (httpx.TransportError, OSError) as exc:
        if deadline.expired or isinstance(exc, httpx.TimeoutException):
            raise TimeoutError(f"no complete answer within {seconds:.3g} s") from exc
        raise
    if deadline.expired:  # cut in the middle of a body that had no length: what came is not the answer
        raise TimeoutError(f"no complete answer within {seconds:.3g} s")
    return status, answer_headers, answer


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for, in seconds (a number, or an HTTP date: the time until
    it), never negative; ``None`` when absent or unreadable."""
    if not value or not value.strip():
        return None
    with contextlib.suppress(ValueError):
        seconds = float(value.strip())
        return max(seconds, 0.0) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is in GMT
        when = when.replace(tzinfo=datetime.UTC)
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)
