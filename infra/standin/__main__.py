"""``python -m ferrymq.infra.standin --host H --port P --data-dir D``: serve the durable AWS stand-in.

With ``--fd N`` it serves the listening socket it inherited as descriptor N instead of binding one: ``ferrymq up``
binds it, so that the stand-in's address is known, and calls to it wait in the socket's backlog, while it starts.

It accepts only requests signed with one key pair: the one named by ``FERRYMQ_STANDIN_ACCESS_KEY_ID`` and
``FERRYMQ_STANDIN_SECRET_ACCESS_KEY``, else the one kept in ``D/credentials`` (generated there on first start).
The secret is never taken from the command line, where any local user could read it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ferrymq import logs
from ferrymq.infra.standin.access_keys import ensure_key_pair, from_environment
from ferrymq.infra.standin.durable_app import DEFAULT_JOURNAL_LIMIT_BYTES
from ferrymq.infra.standin.server import serve
from ferrymq.infra.standin.ttl_sweeper import DEFAULT_INTERVAL_SECONDS
from ferrymq.private_files import restrict_umask
from ferrymq.settings import Settings


def main(argv: list[str] | None = None) -> None:
    restrict_umask()
    parser = argparse.ArgumentParser(prog="python -m ferrymq.infra.standin", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--fd", type=int, help="serve this inherited listening socket (--host and --port unused)")
    parser.add_argument("--data-dir", type=Path, required=True, help="where the snapshot and journal live")
    parser.add_argument("--journal-limit-bytes", type=int, default=DEFAULT_JOURNAL_LIMIT_BYTES,
                        help="take a snapshot once the journal grows past this size")
    parser.add_argument("--parent-pid", type=int, help="stop (cleanly) once this process is no longer the parent")
    parser.add_argument("--ttl-sweep-seconds", type=_positive_seconds, default=DEFAULT_INTERVAL_SECONDS,
                        help="how often expired items of DynamoDB tables with TTL enabled are deleted")
    args = parser.parse_args(argv)
    logs.configure("standin", Settings.from_env())
    key_pair = from_environment(os.environ) or ensure_key_pair(args.data_dir)
    serve(args.host, args.port, args.data_dir, key_pair, args.journal_limit_bytes, parent_pid=args.parent_pid,
          ttl_sweep_seconds=args.ttl_sweep_seconds, fd=args.fd)


def _positive_seconds(text: str) -> float:
    seconds = float(text)
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return seconds


if __name__ == "__main__":
    main()
