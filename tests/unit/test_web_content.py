"""The web workload's generated files and lighttpd configuration (pure)."""

from __future__ import annotations

import hashlib

import pytest

from hvbench.errors import HvbenchError
from hvbench.kinds.web.spec import WebWorkloadSpec
from hvbench.workloads.endpoints import host_endpoint
from hvbench.workloads.web import (
    SiteLayout,
    file_content,
    file_name,
    file_uri,
    lighttpd_config,
)


@pytest.mark.parametrize("kb", [1, 10, 30, 64, 65, 200])
def test_content_size_and_determinism(kb: int) -> None:
    data = file_content(kb)
    assert len(data) == kb * 1024
    assert data == file_content(kb)
    assert file_content(kb + 1)[: len(data)] == data  # one stream, cut to size


def test_content_is_fixed_across_versions() -> None:
    # Pinned: a change here changes what every platform serves.
    assert hashlib.sha256(file_content(10)).hexdigest()[:16] == hashlib.sha256(
        hashlib.shake_256(b"hvbench web content").digest(65536)[:10240]).hexdigest()[:16]
    assert len(set(file_content(1))) > 200  # not a run of one byte


def test_names() -> None:
    assert file_name(30) == "30k.bin" and file_uri(30) == "/30k.bin"


def config(**overrides: object) -> str:
    args: dict[str, object] = {
        "docroot": "/tmp/w/htdocs", "bind_address": "10.0.0.2", "port": 8080,
        "pid_file": "/tmp/w/l.pid", "error_log": "/tmp/w/error.log"}
    args.update(overrides)
    return lighttpd_config(**args)  # type: ignore[arg-type]


def settings(text: str) -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in text.splitlines())


def test_config_one_call_per_connection() -> None:
    values = settings(config())
    assert values["server.document-root"] == '"/tmp/w/htdocs"'
    assert values["server.bind"] == '"10.0.0.2"' and values["server.port"] == "8080"
    assert values["server.pid-file"] == '"/tmp/w/l.pid"'
    assert values["server.errorlog"] == '"/tmp/w/error.log"'
    assert values["server.max-keep-alive-requests"] == "0"  # the server closes
    assert int(values["server.max-connections"]) >= 4096
    assert int(values["server.max-fds"]) >= 2 * int(values["server.max-connections"])
    assert values["server.modules"] == "()"
    assert "accesslog" not in config()


def test_config_keep_alive_for_several_calls() -> None:
    assert settings(config(calls_per_conn=5))["server.max-keep-alive-requests"] == "5"


def test_config_refuses_quotes() -> None:
    with pytest.raises(HvbenchError):
        config(docroot='/tmp/"x')


def test_layout_uses_the_endpoint_bind_address_and_spec() -> None:
    spec = WebWorkloadSpec(port=18080, calls_per_conn=2)
    endpoint = host_endpoint(object(), "192.0.2.1")  # type: ignore[arg-type]
    layout = SiteLayout("/tmp/hvbench-www")
    values = settings(layout.config_text(spec, endpoint))
    assert values["server.bind"] == '"192.0.2.1"' and values["server.port"] == "18080"
    assert values["server.document-root"] == '"/tmp/hvbench-www/htdocs"'
    assert layout.config == "/tmp/hvbench-www/lighttpd.conf"
