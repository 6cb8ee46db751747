"""`python -m memory_server.healthcheck [ADDRESS]`: exit 0 when the server is SERVING, else 1.
For container HEALTHCHECKs; Kubernetes probes gRPC health natively.

With ADDRESS, asks the gRPC health service there over plaintext. Without it, reads the server's
own settings from the environment (GRAPHRAG_MEMORY_*, GRAPHRAG_MEMORY_CONFIG), as the image's
HEALTHCHECK does: a plaintext server is asked over gRPC on its listen port; a TLS server (whose
certificate this process may have no way to verify) through `GET /healthz` on its metrics port.
"""

from __future__ import annotations

import os
import sys
import urllib.request
from collections.abc import Mapping

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memory_server.settings import Settings, SettingsError, settings_from_cli


def check(address: str, timeout_s: float = 3.0) -> bool:
    with grpc.insecure_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=timeout_s
            )
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def check_http(url: str, timeout_s: float = 3.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def _local(address: str) -> str:
    """The address to reach a server listening on `address` from inside its own container."""
    host, _, port = address.rpartition(":")
    return f"127.0.0.1:{port}" if host in ("0.0.0.0", "[::]", "::") else address


def check_configured(settings: Settings) -> bool:
    if not settings.tls_cert_file:
        return check(_local(settings.listen_address))
    if not settings.metrics_address:
        sys.stderr.write(
            "healthcheck: the server serves TLS; set metrics_address so /healthz can be asked\n"
        )
        return False
    return check_http(f"http://{_local(settings.metrics_address)}/healthz")


def main(argv: list[str], environ: Mapping[str, str]) -> int:
    if argv:
        return 0 if check(argv[0]) else 1
    try:
        settings = settings_from_cli([], environ)
    except SettingsError as exc:
        sys.stderr.write(f"healthcheck: configuration error: {exc}\n")
        return 1
    return 0 if check_configured(settings) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], os.environ))
