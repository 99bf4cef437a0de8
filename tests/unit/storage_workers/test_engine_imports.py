"""The engine stays pure (DESIGN.md §2): no wire protocol, no boto3, no os.environ, no clock of its own.

So the field order of received messages, which the engine and the RPC codec share, is written down twice;
a test here keeps the two the same."""

from __future__ import annotations

import ast
from pathlib import Path

import ferrymq.storage.engine

FORBIDDEN = ("ferrymq.rpc", "ferrymq.protocol", "ferrymq.aws", "boto3", "botocore", "os", "time", "asyncio", "socket")


def test_engine_modules_import_nothing_impure() -> None:
    engine_dir = Path(ferrymq.storage.engine.__file__).parent
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


STATE_MODULES = ("state.py", "messages.py", "fifo.py", "tasks.py", "records.py")
REQUEST_SIDE = (
    "ferrymq.errors",
    "ferrymq.storage.engine.answers",
    "ferrymq.storage.engine.engine",
    "ferrymq.storage.engine.move_task_requests",
    "ferrymq.storage.engine.receipts",
    "ferrymq.storage.engine.rows",
)


def test_the_state_followers_run_imports_nothing_of_the_request_side() -> None:
    # the seam replication uses: applying records needs no secret, no decisions and no SQS wording
    engine_dir = Path(ferrymq.storage.engine.__file__).parent
    for name in STATE_MODULES:
        for node in ast.walk(ast.parse((engine_dir / name).read_text())):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                assert not any(module == r or module.startswith(r + ".") for r in REQUEST_SIDE), f"{name}: {module}"
                if module == "ferrymq.storage.engine":
                    assert not {a.name for a in node.names} & {"answers", "receipts", "rows"}, name
