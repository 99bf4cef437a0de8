"""The worker RPC's cluster secret of a local deployment: ``<data dir>/cluster.secret``, 0600.

``ferrymq up`` creates it on first start and names it to every child in ``FERRYMQ_CLUSTER_SECRET_FILE``, so the
secret never appears on a command line or in the environment of the processes. Admin commands on the same
data directory (``ferrymq cluster status``) read it from there. Other deployments set ``FERRYMQ_CLUSTER_SECRET``
or ``FERRYMQ_CLUSTER_SECRET_FILE`` themselves (see ``template.yaml``).
"""

from __future__ import annotations

import secrets
from pathlib import Path

from ferrymq.private_files import private_dir, write_private
from ferrymq.settings import Settings

SECRET_FILE = "cluster.secret"
SECRET_FILE_ENV = "FERRYMQ_CLUSTER_SECRET_FILE"
SECRET_BYTES = 32


def secret_path(settings: Settings) -> Path:
    return settings.data_dir / SECRET_FILE


def ensure_secret_file(settings: Settings) -> Path:
    """The data directory's secret file, written with a new random secret if there is none yet."""
    path = secret_path(settings)
    if not path.exists():
        private_dir(settings.data_dir)
        write_private(path, (secrets.token_urlsafe(SECRET_BYTES) + "\n").encode())
    return path


def with_local_secret(settings: Settings) -> Settings:
    """``settings`` with the data directory's cluster secret when none is configured and the file exists."""
    if settings.cluster_secret:
        return settings
    try:
        secret = secret_path(settings).read_text().strip()
    except FileNotFoundError:
        return settings
    return settings.with_(cluster_secret=secret) if secret else settings
