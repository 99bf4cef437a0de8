"""template.yaml passes cfn-lint (with the SAM transform applied)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ferrymq.infra.template import TEMPLATE_PATH


def test_template_passes_cfn_lint() -> None:
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run([str(cfn_lint), str(TEMPLATE_PATH)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
