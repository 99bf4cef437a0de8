"""The engine stays pure (DESIGN.md §2): no wire protocol, no boto3, no os.environ, no clock of its own.

So the field order of received messages, which the engine and the RPC codec share, is written down twice;
a test here keeps the two the same."""

from __future__ import annotations

import ast
from pathlib import Path

import storage_workers.engine

FORBIDDEN = ("ferrymq.rpc", "ferrymq.protocol", "ferrymq.aws", "boto3", "botocore", "os", "time", "asyncio", "socket")


def test_engine_modules_import_nothing_impure() -> None:
    engine_dir = Path(storage_workers.engine.__file__).parent
    for path in engine_dir.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert not any(name == f or name.startswith(f + ".") for f in FORBIDDEN), f"{path.name} imports {name}"
