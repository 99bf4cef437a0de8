"""An app served with ``asgi_serving.serve_asgi`` (the gateway and the stand-in are): idle, its loop wakes about once a
second, not ten times; it still answers with a current Date header, and SIGTERM stops it at once."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from email.utils import parsedate_to_datetime

_SERVED = textwrap.dedent("""
    from ferrymq.infra import asgi_serving

    async def app(scope, receive, send):
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})

    sock = asgi_serving.bind_socket("127.0.0.1", 0)
    asgi_serving.serve_asgi(app, sock, "READY " + asgi_serving.socket_url(sock), lifespan="off")
""")


def _switches(pid: int) -> int:
    """Voluntary context switches of the process's main thread: each time its loop slept and was woken."""
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("voluntary_ctxt_switches")).split()[1])


def test_an_idle_server_wakes_about_once_a_second_dates_its_answers_and_stops_at_once() -> None:
    served = subprocess.Popen([sys.executable, "-c", _SERVED], stdout=subprocess.PIPE, text=True)
    try:
        assert served.stdout is not None
        url = served.stdout.readline().split()[1]
        time.sleep(1.5)
        # when it is left idle for four seconds
        before = _switches(served.pid)
        time.sleep(4)
        woken = _switches(served.pid) - before
        # then it woke a few times (once a second; uvicorn's own tick woke it forty times)
        assert woken <= 12, woken
        # and an answer carries the current date, to the second
        with urllib.request.urlopen(url, timeout=5) as answer:
            date = parsedate_to_datetime(answer.headers["date"]).timestamp()
        assert abs(date - time.time()) < 2.5
        # and SIGTERM stops it at once, not at its next look
        stopped = time.monotonic()
        served.send_signal(signal.SIGTERM)
        assert served.wait(10) == 0
        assert time.monotonic() - stopped < 0.8
    finally:
        served.kill()
        served.wait()
