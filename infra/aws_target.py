"""Where the local stack's AWS calls go: an endpoint the user named, or the durable stand-in.

``AWS_ENDPOINT_URL`` (or ``FERRYMQ_AWS_ENDPOINT_URL``) naming an endpoint — LocalStack, real AWS — means no
stand-in is started and the user's credentials are used as they are. Otherwise the stand-in serves
``settings.data_dir / "aws"`` and accepts only the key pair generated there on first start
(:mod:`ferrymq.infra.standin.access_keys`), which every process of the stack signs with. ``ferrymq up`` records the
running stand-in's URL in that directory so admin commands reach the same state; with no stack running, an
admin command starts a stand-in on that directory for the length of the command.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ferrymq.infra.children import Child, Starting, child_environment, launch_child, python_module_argv
from ferrymq.infra.standin import layout
from ferrymq.infra.standin.access_keys import KeyPair, ensure_key_pair
from ferrymq.private_files import write_private
from ferrymq.settings import Settings

STANDIN_HOST = "127.0.0.1"


def named_endpoint(env: Mapping[str, str]) -> str | None:
    """The AWS endpoint the user chose, if any."""
    return env.get("FERRYMQ_AWS_ENDPOINT_URL") or env.get("AWS_ENDPOINT_URL") or None


def standin_dir(settings: Settings) -> Path:
    return settings.data_dir / "aws"


def named_environment(endpoint: str) -> dict[str, str]:
    """What boto3 needs to reach a named endpoint (it reads ``AWS_ENDPOINT_URL`` only)."""
    return {"AWS_ENDPOINT_URL": endpoint}


def standin_key_pair(settings: Settings) -> KeyPair:
    """The key pair the stand-in of ``settings.data_dir`` accepts (generated on first use)."""
    return ensure_key_pair(standin_dir(settings))


def standin_environment(endpoint: str, region: str, key_pair: KeyPair) -> dict[str, str]:
    """What boto3 needs to reach the stand-in: its URL and the key pair it accepts."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": key_pair.access_key_id,
        "AWS_SECRET_ACCESS_KEY": key_pair.secret_access_key,
        "AWS_DEFAULT_REGION": region,
    }


def apply_environment(aws_env: Mapping[str, str]) -> None:
    """Point this process's boto3 clients at ``aws_env`` (boto3 reads these variables itself)."""
    os.environ.update(aws_env)
    if "AWS_ACCESS_KEY_ID" in aws_env:
        # A leftover session token would belong to other credentials.
        os.environ.pop("AWS_SESSION_TOKEN", None)


def launch_standin(settings: Settings, env: Mapping[str, str], port: int = 0) -> tuple[Starting, str]:
    """Start the stand-in on ``standin_dir(settings)`` and ``port`` (0: any free one) without waiting for it;
    returns it with its endpoint URL. The socket is bound and listening here, and handed to the stand-in, so the
    endpoint is known at once and a call made to it while the stand-in starts waits in the socket's backlog
    instead of being refused: whoever depends on it can start meanwhile. Raises OSError if the port is taken."""
    # Here, not at the top: it brings uvicorn, which the admin commands using this module need only for this.
    from ferrymq.infra import asgi_serving

    sock = asgi_serving.bind_socket(STANDIN_HOST, port)
    try:
        argv = python_module_argv("ferrymq.infra.standin", "--fd", str(sock.fileno()),
                                  "--data-dir", str(standin_dir(settings)), "--parent-pid", str(os.getpid()))
        child_env = child_environment(env, **standin_key_pair(settings).environment())
        starting = launch_child("aws", argv, child_env, layout.READY_PREFIX, pass_fds=(sock.fileno(),))
        return starting, asgi_serving.socket_url(sock)
    finally:
        # The stand-in holds its own copy: a stand-in that exits leaves the port free.
        sock.close()


def start_standin(settings: Settings, env: Mapping[str, str], should_abort: Callable[[], bool] = lambda: False,
                  timeout: float = 60.0, port: int = 0) -> tuple[Child, str]:
    """Start the stand-in on ``standin_dir(settings)`` and ``port`` (0: any free one); returns it, serving, with
    its endpoint URL."""
    starting, endpoint = launch_standin(settings, env, port)
    return starting.wait_ready(should_abort=should_abort, timeout=timeout), endpoint


def write_endpoint_file(settings: Settings, endpoint: str) -> None:
    write_private(standin_dir(settings) / layout.ENDPOINT_FILE, (endpoint + "\n").encode())


def remove_endpoint_file(settings: Settings, endpoint: str) -> None:
    """Remove the endpoint file if it still names ``endpoint``, the stand-in its caller started and recorded:
    a file naming another stand-in belongs to another ``ferrymq up``."""
    path = standin_dir(settings) / layout.ENDPOINT_FILE
    try:
        if path.read_text().strip() != endpoint:
            return
    except FileNotFoundError:
        return
    path.unlink(missing_ok=True)


def running_standin_endpoint(settings: Settings) -> str | None:
    """The URL of the stand-in a running ``ferrymq up`` serves this data directory with, if there is one."""
    directory = standin_dir(settings)
    path = directory / layout.ENDPOINT_FILE
    if not path.exists() or not layout.is_locked(directory):
        return None
    return path.read_text().strip() or None


@dataclass(frozen=True)
class AdminTarget:
    """Where an admin command's AWS calls go; ``temporary`` when the stand-in was started just for it."""

    endpoint: str
    environment: dict[str, str]
    temporary: bool


@contextmanager
def admin_target(settings: Settings, env: Mapping[str, str]) -> Iterator[AdminTarget]:
    """The AWS target for an admin command, starting a stand-in for its duration when none runs."""
    endpoint = named_endpoint(env)
    if endpoint:
        yield AdminTarget(endpoint, named_environment(endpoint), temporary=False)
        return
    endpoint = running_standin_endpoint(settings)
    if endpoint:
        yield AdminTarget(endpoint, standin_environment(endpoint, settings.region, standin_key_pair(settings)),
                          temporary=False)
        return
    # The command's own output is what its user reads: the stand-in it starts for a moment keeps quiet.
    quiet = env if "FERRYMQ_LOG_LEVEL" in env else {**env, "FERRYMQ_LOG_LEVEL": "WARNING"}
    child, endpoint = start_standin(settings, quiet)
    try:
        yield AdminTarget(endpoint, standin_environment(endpoint, settings.region, standin_key_pair(settings)),
                          temporary=True)
    finally:
        child.stop()
