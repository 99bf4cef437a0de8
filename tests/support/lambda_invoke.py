"""``python -m tests.support.lambda_invoke``: the front-end function's handler in an interpreter of its own, as
a Lambda execution environment holds it: events in, one JSON line each on stdin, results out, one JSON line
each on stdout, until stdin ends.  Settings come from the environment, as in Lambda."""

from __future__ import annotations

import json
import sys


def main() -> int:
    from ferrymq.frontend.app import handler

    for line in sys.stdin:
        if line.strip():
            print(json.dumps(handler(json.loads(line), None)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())


class LambdaProcess:
    """The handler running in ``python -m tests.support.lambda_invoke`` with ``env``; :meth:`invoke` one event."""

    def __init__(self, env: dict[str, str]) -> None:
        import subprocess
        from pathlib import Path

        # From the repository's root, where ``tests`` is importable; nothing is written there.
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.lambda_invoke"], env=env, cwd=Path(__file__).resolve().parents[2],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
        )

    def invoke(self, event: dict[str, object]) -> dict[str, object]:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(event) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the handler's process ended (status {self._process.wait(5)})")
        return dict(json.loads(line))

    def stop(self) -> None:
        from tests.support.processes import terminate_group

        if self._process.stdin is not None:
            self._process.stdin.close()
        terminate_group(self._process, 5)
