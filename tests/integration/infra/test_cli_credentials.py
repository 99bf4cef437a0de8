"""``ferrymq credentials``: temporary credentials, disabling and enabling, and their refusals, without a stack."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path

from tests.integration.infra.processes import child_env

FERRYMQ = [sys.executable, "-m", "ferrymq.infra.cli"]


def _ferrymq(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FERRYMQ, *args], env=child_env(FERRYMQ_DATA_DIR=str(data_dir)), capture_output=True,
                          text=True, timeout=120)


def test_temporary_credentials_disable_and_enable(tmp_path: Path) -> None:
    # given temporary credentials made by the admin command
    made = _ferrymq(tmp_path, "credentials", "create", "--account", "111122223333", "--user", "tmp", "--temporary",
                    "--duration-seconds", "900", "--json")
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert created["Expiration"].endswith("Z") and created["CreatedAt"].endswith("Z")
    assert created["AccessKeyId"].startswith("ASIA") and len(created["SessionToken"]) > 100
    expires = datetime.datetime.fromisoformat(created["Expiration"])
    assert 800 < (expires - datetime.datetime.now(datetime.UTC)).total_seconds() <= 900
    # when it is disabled, then the listing says so, with its expiry and without its secret or token
    assert _ferrymq(tmp_path, "credentials", "disable", created["AccessKeyId"]).stdout.strip() == (
        f"disabled {created['AccessKeyId']}")
    listed = json.loads(_ferrymq(tmp_path, "credentials", "list", "--json").stdout)
    assert listed == [{"AccessKeyId": created["AccessKeyId"], "AccountId": "111122223333", "UserName": "tmp",
                       "CreatedAt": created["CreatedAt"], "Status": "Inactive", "Expiration": created["Expiration"]}]
    # and enabled again, it is active
    assert _ferrymq(tmp_path, "credentials", "enable", created["AccessKeyId"]).returncode == 0
    # and the table is `keys list`'s: an ADMIN column, and times in UTC with Z
    table = [line for line in _ferrymq(tmp_path, "credentials", "list").stdout.splitlines() if line.strip()]
    assert table[0].split() == ["ACCESS", "KEY", "ID", "ACCOUNT", "USER", "STATUS", "ADMIN", "EXPIRES", "CREATED"]
    assert set(table[1].strip()) == {"─"}
    row = table[2].split()
    assert row[3:5] == ["Active", "no"] and row[5] == created["Expiration"]
    assert row[5].endswith("Z") and row[6].endswith("Z") and "+00:00" not in "".join(table)


def test_refusals(tmp_path: Path) -> None:
    # a key that does not exist cannot be disabled or enabled
    for verb in ("disable", "enable"):
        missing = _ferrymq(tmp_path, "credentials", verb, "AKIANOSUCHKEY0000000")
        assert (missing.returncode, missing.stderr.strip()) == (1, "ferrymq: no access key AKIANOSUCHKEY0000000")
    # a duration is for temporary credentials only, and within 1..129600 seconds
    plain = _ferrymq(tmp_path, "credentials", "create", "--account", "111122223333", "--user", "u",
                     "--duration-seconds", "60")
    assert (plain.returncode, plain.stderr.strip()) == (2, "ferrymq: --duration-seconds is for --temporary credentials")
    for bad in ("0", "129601", "soon"):
        out_of_range = _ferrymq(tmp_path, "credentials", "create", "--account", "111122223333", "--user", "u",
                                "--temporary", "--duration-seconds", bad)
        assert out_of_range.returncode == 2
        assert "--duration-seconds" in out_of_range.stderr
    # an account id is 12 ASCII digits, checked before anything starts
    for bad in ("12", "1111222233334", "11112222333x", "١١١١٢٢٢٢٣٣٣٣"):
        refused = _ferrymq(tmp_path, "credentials", "create", "--account", bad, "--user", "u")
        assert refused.returncode == 2
        assert "an account id is 12 digits" in refused.stderr
