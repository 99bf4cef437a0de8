"""A null SQS server: canned AWS JSON 1.0 answers from uvicorn (httptools, uvloop), as the gateway is served.

    python benchmarks/null_sqs_server.py --port 0     # prints NULL_SQS_READY http://127.0.0.1:PORT

It checks nothing, stores nothing and answers every action FerryMQ's benchmarks use with a well-formed reply,
so what a client measures against it is the cost of the client, HTTP and JSON alone: the floor any SQS server on
this machine stands on. ReceiveMessage returns ten canned messages, so a receive + delete loop keeps moving.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import socket
import sys
import uuid
from typing import Any

import orjson
import uvicorn
import uvloop

READY = "NULL_SQS_READY"
_BODY_MD5 = hashlib.md5(b"x" * 256).hexdigest()
_RECEIVED = orjson.dumps({
    "Messages": [
        {"MessageId": str(uuid.UUID(int=i)), "ReceiptHandle": f"handle-{i}", "MD5OfBody": _BODY_MD5, "Body": "x" * 256}
        for i in range(10)
    ]
})
_HEADERS = [(b"content-type", b"application/x-amz-json-1.0")]


def _answer(action: str, request: dict[str, Any]) -> bytes:
    if action == "CreateQueue":
        return orjson.dumps({"QueueUrl": f"http://127.0.0.1/000000000000/{request.get('QueueName', 'q')}"})
    if action == "SendMessage":
        return orjson.dumps({"MessageId": str(uuid.uuid4()), "MD5OfMessageBody": _BODY_MD5})
    if action in ("SendMessageBatch", "DeleteMessageBatch"):
        entries = request.get("Entries", [])
        done = [{"Id": e.get("Id"), "MessageId": str(uuid.uuid4()), "MD5OfMessageBody": _BODY_MD5}
                if action == "SendMessageBatch" else {"Id": e.get("Id")} for e in entries]
        return orjson.dumps({"Successful": done, "Failed": []})
    if action == "ReceiveMessage":
        return _RECEIVED
    return b"{}"


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    target = dict(scope["headers"]).get(b"x-amz-target", b"").decode()
    action = target.rpartition(".")[2]
    try:
        request = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError:
        request = {}
    payload = _answer(action, request if isinstance(request, dict) else {})
    await send({"type": "http.response.start", "status": 200,
                "headers": [*_HEADERS, (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(2048)
    print(f"{READY} http://{args.host}:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, loop="none", http="httptools", access_log=False, log_level="warning",
                            lifespan="off")
    uvloop.install()
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    sys.exit(main())
