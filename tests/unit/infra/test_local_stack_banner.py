"""What `ferrymq up` prints once the stack is ready."""

from __future__ import annotations

from pathlib import Path

from ferrymq.infra.local_stack import banner
from ferrymq.settings import Settings


def test_banner_ends_with_the_machine_readable_line_and_names_the_credentials() -> None:
    settings = Settings(data_dir=Path("/data"), region="us-east-1", dev_access_key="test", dev_secret_key="s3cr3t")
    text = banner(settings, "http://127.0.0.1:9324", "http://127.0.0.1:5000", standin=True)
    lines = text.splitlines()
    assert lines[-1] == "FERRYMQ_READY endpoint=http://127.0.0.1:9324"
    assert any("s3cr3t" in line for line in lines)
    assert any("us-east-1" in line for line in lines)
    assert any("stand-in, state in /data/aws" in line for line in lines)


def test_banner_with_a_named_endpoint_does_not_mention_a_standin() -> None:
    text = banner(Settings(), "http://127.0.0.1:9324", "http://localhost:4566", standin=False)
    assert "stand-in" not in text
    assert "http://localhost:4566" in text


def test_banner_of_an_https_gateway_tells_clients_which_certificate_to_trust() -> None:
    self_signed = banner(Settings(data_dir=Path("/data"), tls=True), "https://127.0.0.1:9324", "x", standin=True)
    named = banner(Settings(tls_cert_file=Path("/etc/ferrymq/cert.pem"), tls_key_file=Path("/etc/ferrymq/key.pem")),
                   "https://127.0.0.1:9324", "x", standin=True)
    plain = banner(Settings(), "http://127.0.0.1:9324", "x", standin=True)
    assert "--endpoint-url https://127.0.0.1:9324 --region us-east-1 --ca-bundle /data/tls/cert.pem" in self_signed
    assert "--ca-bundle /etc/ferrymq/cert.pem" in named
    assert "--ca-bundle" not in plain


def test_banner_states_the_storage_shape_in_plain_words() -> None:
    one = banner(Settings(), "http://127.0.0.1:9324", "x", standin=True)
    assert "cluster local: 3 workers, 1 partition, replication factor 3, acks majority" in one
    two = banner(Settings(clusters=2, partitions=4, workers=1, replication_factor=1), "http://h", "x", standin=True)
    assert "2 clusters (local, local-1), each 1 worker, 4 partitions, replication factor 1" in two


def test_banner_links_the_dashboard_unless_it_is_off() -> None:
    text = banner(Settings(), "http://127.0.0.1:9324", "x", standin=True)
    assert "  dashboard        http://127.0.0.1:9324/dashboard/ (log in with the access key above; served to " \
           "loopback only)" in text.splitlines()
    assert "loopback" not in banner(Settings(dashboard_remote=True), "http://h", "x", standin=True)
    assert "/dashboard/" not in banner(Settings(dashboard_enabled=False), "http://h", "x", standin=True)


def test_the_banner_names_each_failing_worker_with_its_last_error() -> None:
    text = banner(Settings(), "http://h", "x", standin=True, failing=["worker-1: failed to start: exited with status 1 "
                                                                      "(the log is damaged)"])
    lines = text.splitlines()
    storage = next(i for i, line in enumerate(lines) if line.startswith("  storage "))
    assert lines[storage + 1] == ("  failing          worker-1: failed to start: exited with status 1 (the log is "
                                  "damaged); started again with backoff")
    assert "failing" not in banner(Settings(), "http://h", "x", standin=True)


def test_the_banner_says_how_many_gateway_processes_serve_the_endpoint() -> None:
    lines = banner(Settings(), "http://h", "x", standin=True).splitlines()
    assert lines[lines.index("  endpoint         http://h") + 1] == "  gateway          1 process"
    assert ("  gateway          3 processes sharing the port (SO_REUSEPORT)"
            in banner(Settings(gateway_processes=3), "http://h", "x", standin=True).splitlines())
