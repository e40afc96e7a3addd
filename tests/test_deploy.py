"""The deployment files in ``deploy/`` agree with the code, so they cannot silently rot.

Ports come from ``Settings``; every ``PINOCHLE_REFEREE_*`` name must be a real flag of
``pinochle-referee serve`` (derived from ``add_arguments``); probe and Envoy health-check service
names must be ones the server registers with the health service; Prometheus must scrape every
replica's metrics port; Kubernetes and compose must give the server more time than its drain and
grace periods. The Dockerfile's health check command is run against a real server.
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from protos.pinochle.referee.v1 import referee_pb2 as pb
from referee.cli import build_parser
from referee.service.server import SERVICE_NAMES, start_server
from referee.service.settings import (
    CLIENT_PING_SECONDS,
    ENV_PREFIX,
    Settings,
    add_arguments,
    settings_from,
)

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
DOCKERFILE = DEPLOY / "Dockerfile"

GRPC_PORT = Settings.port
METRICS_PORT = Settings.metrics_port
REFEREE_SERVICE = pb.DESCRIPTOR.services_by_name["RefereeService"].full_name
# What the server registers with the health service: overall ("") and each service's full name.
HEALTH_NAMES = {"", *SERVICE_NAMES}


# --- helpers -------------------------------------------------------------------------------------


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def load_yaml_documents(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser


def flag_actions() -> dict[str, argparse.Action]:
    """Environment variable name -> its flag (``--metrics-port``: ``..._METRICS_PORT``)."""
    names: dict[str, argparse.Action] = {}
    for action in serve_parser()._actions:
        if action.dest == "help":
            continue
        for option in action.option_strings:
            if option.startswith("--"):
                names[ENV_PREFIX + option[2:].replace("-", "_").upper()] = action
    return names


def check_env_names(env: Mapping[str, object], where: str) -> None:
    known = flag_actions()
    for name in env:
        assert name.startswith(ENV_PREFIX), f"{where}: {name} is not a {ENV_PREFIX}* variable"
        assert name in known, f"{where}: {name} matches no flag of `pinochle-referee serve`"


def effective_settings(
    env: Mapping[str, object], monkeypatch: pytest.MonkeyPatch, argv: list[str] | None = None
) -> Settings:
    """The settings a container gets from this environment and the image's entrypoint."""
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, str(value))
    command = argv if argv is not None else dockerfile_entrypoint()[1:]
    return settings_from(build_parser().parse_args(command))


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    current = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not current):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        keyword, _, rest = current.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        current = ""
    assert not current, "the Dockerfile ends inside a continued line"
    return instructions


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    last_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[last_from:]


def build_stages() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    last_from = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    return instructions[:last_from]


def exec_form(arguments: str) -> list[str]:
    value = json.loads(arguments)
    assert isinstance(value, list), f"not in exec (JSON) form: {arguments}"
    assert all(isinstance(item, str) for item in value)
    return [str(item) for item in value]


def dockerfile_entrypoint() -> list[str]:
    entrypoints = [args for keyword, args in final_stage() if keyword == "ENTRYPOINT"]
    assert len(entrypoints) == 1, "the final stage needs exactly one ENTRYPOINT"
    return exec_form(entrypoints[0])


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, args in final_stage():
        if keyword != "ENV":
            continue
        for name, value in re.findall(r'(\w+)=("[^"]*"|\S+)', args):
            env[name] = value.strip('"')
    return env


def dockerfile_healthcheck() -> list[str]:
    checks = [args for keyword, args in final_stage() if keyword == "HEALTHCHECK"]
    assert len(checks) == 1, "the final stage needs one HEALTHCHECK"
    _, _, command = checks[0].partition("CMD")
    argv = exec_form(command.strip())
    assert argv[:2] == ["python", "-c"], argv
    return argv


def compose() -> dict[str, Any]:
    data = load_yaml(DEPLOY / "compose.yaml")
    assert isinstance(data, dict)
    return data


def referee_services() -> dict[str, dict[str, Any]]:
    """Compose services built from deploy/Dockerfile: the referee replicas."""
    services = compose()["services"]
    return {
        name: service
        for name, service in services.items()
        if isinstance(service.get("build"), dict)
        and service["build"].get("dockerfile") == "deploy/Dockerfile"
    }


def referee_env(name: str) -> dict[str, str]:
    env = referee_services()[name].get("environment", {})
    assert isinstance(env, dict), "write compose environments as mappings"
    return {key: str(value) for key, value in env.items()}


def envoy() -> dict[str, Any]:
    data = load_yaml(DEPLOY / "envoy.yaml")
    assert isinstance(data, dict)
    return data


def envoy_cluster(name: str) -> dict[str, Any]:
    clusters = {c["name"]: c for c in envoy()["static_resources"]["clusters"]}
    assert name in clusters, f"envoy.yaml routes to an unknown cluster {name}"
    cluster: dict[str, Any] = clusters[name]
    return cluster


def envoy_http_manager() -> dict[str, Any]:
    (listener,) = envoy()["static_resources"]["listeners"]
    (chain,) = listener["filter_chains"]
    (manager,) = chain["filters"]
    assert manager["name"] == "envoy.filters.network.http_connection_manager"
    config: dict[str, Any] = manager["typed_config"]
    return config


def envoy_routed_clusters() -> set[str]:
    hosts = envoy_http_manager()["route_config"]["virtual_hosts"]
    return {route["route"]["cluster"] for host in hosts for route in host["routes"]}


def k8s(name: str) -> Any:
    return load_yaml(K8S / name)


def pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = k8s("deployment.yaml")["spec"]["template"]["spec"]
    return spec


def referee_container() -> dict[str, Any]:
    (container,) = pod_spec()["containers"]
    assert isinstance(container, dict)
    return container


def secret_data() -> dict[str, str]:
    secret = k8s("secret.yaml")
    return {str(k): str(v) for k, v in secret.get("stringData", {}).items()}


def k8s_env() -> dict[str, str]:
    """The container's environment: the ConfigMap plus the Secret's values."""
    container = referee_container()
    configmap = k8s("configmap.yaml")
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        assert source["configMapRef"]["name"] == configmap["metadata"]["name"]
        env.update({str(k): str(v) for k, v in configmap["data"].items()})
    secret = k8s("secret.yaml")
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = str(item["value"])
            continue
        ref = item["valueFrom"]["secretKeyRef"]
        assert ref["name"] == secret["metadata"]["name"], f"{item['name']}: unknown Secret"
        assert ref["key"] in secret_data(), f"{item['name']}: the Secret has no {ref['key']}"
        env[item["name"]] = secret_data()[ref["key"]]
    return env


def duration_seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)?", text.strip())
    assert match, f"not a duration: {text}"
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}[match.group(2)]
    return float(match.group(1)) * scale


# --- the flags themselves -------------------------------------------------------------------------


def test_each_flag_reads_the_environment_variable_named_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The derivation used below (``--metrics-port`` -> ``..._METRICS_PORT``) is the server's."""
    for name, action in flag_actions().items():
        value: object
        if action.choices:
            value = sorted(str(choice) for choice in action.choices)[-1]
        elif action.type is int:
            value = 12345
        elif action.type is float:
            value = 7.5
        else:
            value = "from-the-environment"
        monkeypatch.setenv(name, str(value))
        default = next(a.default for a in serve_parser()._actions if a.dest == action.dest)
        monkeypatch.delenv(name)
        assert str(default) == str(value), f"{name} does not set {action.option_strings}"


# --- Dockerfile -----------------------------------------------------------------------------------


def test_dockerfile_exposes_the_grpc_and_metrics_ports() -> None:
    exposed = {
        int(port.split("/")[0])
        for keyword, args in final_stage()
        if keyword == "EXPOSE"
        for port in args.split()
    }
    assert exposed == {GRPC_PORT, METRICS_PORT}


def test_dockerfile_runs_as_a_non_root_user() -> None:
    users = [args for keyword, args in final_stage() if keyword == "USER"]
    assert users, "the final stage must switch to a non-root USER"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}
    uid = referee_container_uid()
    if user.isdigit():
        assert int(user) == uid, "Dockerfile USER and the pod's runAsUser differ"


def referee_container_uid() -> int:
    uid = pod_spec()["securityContext"]["runAsUser"]
    assert isinstance(uid, int)
    return uid


def test_dockerfile_entrypoint_is_the_serve_command_on_all_interfaces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entrypoint = dockerfile_entrypoint()
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "scripts"
    ]
    assert entrypoint[0] in scripts, f"{entrypoint[0]} is not a console script of the project"
    assert entrypoint[1] == "serve"
    env = dockerfile_env()
    check_env_names({k: v for k, v in env.items() if k.startswith("PINOCHLE")}, "Dockerfile ENV")
    settings = effective_settings(
        {k: v for k, v in env.items() if k.startswith(ENV_PREFIX)}, monkeypatch
    )
    assert settings.host == "0.0.0.0"
    assert (settings.port, settings.metrics_port) == (GRPC_PORT, METRICS_PORT)


def test_dockerfile_copies_what_exists_and_generates_stubs_like_the_makefile() -> None:
    ignored = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for required in (".venv", "**/node_modules", "data"):
        assert required in ignored, f".dockerignore should exclude {required}"
    for keyword, args in build_stages():
        if keyword != "COPY" or args.startswith("--from"):
            continue
        *sources, _ = args.split()
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
            assert not any(fnmatch.fnmatch(source, pattern) for pattern in ignored), source
    run = " ".join(args for keyword, args in build_stages() if keyword == "RUN")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    make_outputs = set(re.findall(r"--\w+_out=", makefile))
    assert make_outputs, "the Makefile no longer generates stubs with grpc_tools.protoc"
    assert make_outputs <= set(re.findall(r"--\w+_out=", run))
    proto_src = re.search(r"^PROTO_SRC\s*:=\s*(.+)$", makefile, re.MULTILINE)
    assert proto_src
    for proto in proto_src.group(1).split():
        assert proto in run, f"the image does not generate stubs for {proto}"
        assert (ROOT / proto).exists()


def test_the_image_build_compiles_the_rules_core(tmp_path: Path) -> None:
    """No Docker engine runs here, so the image's ``pip install /src`` is done the same way on
    a copy of what the Dockerfile copies (no local build in it): the wheel holds every compiled
    module ``setup.py`` names and the shared library, beside their sources. The Dockerfile
    copies ``setup.py`` and fails its build when the core did not compile."""
    source = tmp_path / "src"
    skip = shutil.ignore_patterns("*.so", "__pycache__", "node_modules", "*.egg-info")
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("referee", "protos", "clients/python"):
        shutil.copytree(ROOT / folder, source / folder, ignore=skip)
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(wheels),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PINOCHLE_REFEREE_PURE"},  # as the image
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("pinochle_referee-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    setup_text = (ROOT / "setup.py").read_text(encoding="utf-8")
    modules = re.findall(r'"(referee/[a-z_/]+)\.py"', setup_text)
    assert modules
    for module in modules:
        assert any(re.fullmatch(rf"{module}\.cpython-[^/]+\.so", n) for n in names), module
        assert f"{module}.py" in names
    assert any(re.fullmatch(r"referee/_native__mypyc\.cpython-[^/]+\.so", n) for n in names)
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^COPY .*\bsetup\.py\b", dockerfile, re.MULTILINE)
    assert "rules core not compiled" in dockerfile


async def test_dockerfile_healthcheck_asks_the_real_health_service(tmp_path: Path) -> None:
    argv = dockerfile_healthcheck()
    running = await start_server(
        Settings(port=0, db=str(tmp_path / "referee.db"), metrics_port=0, host="127.0.0.1")
    )

    async def health_check() -> int:
        env = {**os.environ, ENV_PREFIX + "PORT": str(running.port)}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *argv[1:],
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        return await asyncio.wait_for(process.wait(), timeout=30)

    try:
        assert await health_check() == 0, "SERVING must pass the container health check"
        await running.health.enter_graceful_shutdown()
        assert await health_check() != 0, "NOT_SERVING must fail the container health check"
    finally:
        await running.stop(0)


# --- compose, Envoy, Prometheus -------------------------------------------------------------------


def test_compose_runs_two_replicas_on_postgres(monkeypatch: pytest.MonkeyPatch) -> None:
    services = compose()["services"]
    replicas = referee_services()
    assert len(replicas) >= 2
    assert str(services["postgres"]["image"]).startswith("postgres:15")
    assert "healthcheck" in services["postgres"]
    for name, service in replicas.items():
        env = referee_env(name)
        check_env_names(env, f"compose.yaml {name}")
        settings = effective_settings(env, monkeypatch)
        assert settings.db.startswith("postgresql://"), name
        assert "@postgres:" in settings.db, f"{name}: the database host is the postgres service"
        assert (settings.port, settings.metrics_port) == (GRPC_PORT, METRICS_PORT)
        assert {int(port) for port in service.get("expose", [])} >= {GRPC_PORT, METRICS_PORT}
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
        grace = duration_seconds(str(service["stop_grace_period"]))
        assert grace > settings.drain_seconds + settings.grace_seconds, (
            f"{name}: stop_grace_period <= --drain-seconds + --grace-seconds"
        )
    for name in ("envoy", "prometheus"):
        for volume in services[name].get("volumes", []):
            source = str(volume).split(":")[0]
            if source.startswith("./"):
                assert (DEPLOY / source).exists(), f"{name} mounts a missing {source}"


def test_envoy_balances_over_every_replica_on_the_grpc_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    routed = envoy_routed_clusters()
    assert routed
    replicas = referee_services()
    for cluster_name in routed:
        cluster = envoy_cluster(cluster_name)
        assert cluster["lb_policy"] == "ROUND_ROBIN"
        options = cluster["typed_extension_protocol_options"][
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
        ]
        assert "http2_protocol_options" in options["explicit_http_config"], "gRPC needs HTTP/2"
        endpoints = {
            (
                endpoint["endpoint"]["address"]["socket_address"]["address"],
                endpoint["endpoint"]["address"]["socket_address"]["port_value"],
            )
            for group in cluster["load_assignment"]["endpoints"]
            for endpoint in group["lb_endpoints"]
        }
        expected = {
            (name, effective_settings(referee_env(name), monkeypatch).port) for name in replicas
        }
        assert endpoints == expected
        checks = cluster["health_checks"]
        assert checks, "upstreams must be health-checked"
        for check in checks:
            assert check["grpc_health_check"].get("service_name", "") in HEALTH_NAMES


def test_envoys_keepalive_pings_are_ones_the_referee_accepts() -> None:
    """Envoy pings each upstream connection every 30 s; gRPC's server default (one ping per five
    minutes on a quiet connection) answered that with GOAWAY "too many pings" every minute
    and a half, cutting the WatchGame streams relayed on it. The referee accepts a ping every
    CLIENT_PING_SECONDS, so Envoy must not ping more often."""
    for cluster_name in envoy_routed_clusters():
        options = envoy_cluster(cluster_name)["typed_extension_protocol_options"][
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
        ]
        keepalive = options["explicit_http_config"]["http2_protocol_options"][
            "connection_keepalive"
        ]
        assert keepalive["interval"].endswith("s")
        assert float(keepalive["interval"][:-1]) >= CLIENT_PING_SECONDS


def test_envoy_speaks_grpc_web_and_exposes_the_rich_error_headers() -> None:
    manager = envoy_http_manager()
    filters = [f["name"] for f in manager["http_filters"]]
    assert "envoy.filters.http.grpc_web" in filters
    assert "envoy.filters.http.cors" in filters
    assert filters[-1] == "envoy.filters.http.router"
    for host in manager["route_config"]["virtual_hosts"]:
        cors = host["typed_per_filter_config"]["envoy.filters.http.cors"]
        exposed = {h.strip() for h in cors["expose_headers"].split(",")}
        assert {"grpc-status", "grpc-message", "grpc-status-details-bin"} <= exposed
        allowed = {h.strip() for h in cors["allow_headers"].split(",")}
        assert {"authorization", "x-grpc-web", "content-type"} <= allowed
    (listener,) = envoy()["static_resources"]["listeners"]
    port = listener["address"]["socket_address"]["port_value"]
    published = [str(p) for p in compose()["services"]["envoy"]["ports"]]
    assert any(p.endswith(f":{port}") for p in published), "Envoy's listener is not published"


def test_prometheus_scrapes_every_replica_on_the_metrics_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = load_yaml(DEPLOY / "prometheus.yml")
    services = compose()["services"]
    scraped: set[str] = set()
    for job in config["scrape_configs"]:
        for static in job.get("static_configs", []):
            for target in static["targets"]:
                host, _, port = str(target).rpartition(":")
                assert host in services, f"prometheus.yml: {host} is no compose service"
                if host in referee_services():
                    metrics_port = effective_settings(referee_env(host), monkeypatch).metrics_port
                    assert int(port) == metrics_port == METRICS_PORT, target
                    scraped.add(host)
    assert scraped == set(referee_services()), "every replica must be scraped"


def test_compose_names_referenced_by_envoy_exist() -> None:
    services = compose()["services"]
    for cluster_name in envoy_routed_clusters():
        for group in envoy_cluster(cluster_name)["load_assignment"]["endpoints"]:
            for endpoint in group["lb_endpoints"]:
                host = endpoint["endpoint"]["address"]["socket_address"]["address"]
                assert host in services, f"envoy.yaml: {host} is no compose service"


# --- Kubernetes -----------------------------------------------------------------------------------


def test_k8s_kustomization_lists_every_manifest() -> None:
    resources = k8s("kustomization.yaml")["resources"]
    manifests = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(resources) == manifests


def test_k8s_deployment_ports_env_and_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    deployment = k8s("deployment.yaml")
    assert deployment["spec"]["replicas"] >= 2
    container = referee_container()
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"grpc": GRPC_PORT, "metrics": METRICS_PORT}
    env = k8s_env()
    check_env_names(env, "k8s ConfigMap and Deployment env")
    assert {e["name"] for e in container["env"] if "valueFrom" in e} >= {ENV_PREFIX + "DB"}
    settings = effective_settings(env, monkeypatch, container.get("args") or None)
    assert (settings.port, settings.metrics_port) == (GRPC_PORT, METRICS_PORT)
    assert settings.db.startswith("postgresql://")
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == settings.metrics_port
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind]), kind


def test_k8s_probes_use_native_grpc_health_with_registered_names() -> None:
    container = referee_container()
    readiness = container["readinessProbe"]["grpc"]
    liveness = container["livenessProbe"]["grpc"]
    assert readiness["port"] == liveness["port"] == GRPC_PORT
    assert readiness["service"] == REFEREE_SERVICE
    assert liveness.get("service", "") == ""
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if probe in container:
            assert container[probe]["grpc"].get("service", "") in HEALTH_NAMES, probe
            assert container[probe]["grpc"]["port"] == GRPC_PORT, probe


def test_k8s_termination_outlasts_the_server_grace_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = effective_settings(k8s_env(), monkeypatch)
    pre_stop = 0.0
    hook = referee_container().get("lifecycle", {}).get("preStop", {})
    if "exec" in hook:
        command = hook["exec"]["command"]
        if command[0] == "sleep":
            pre_stop = float(command[1])
    elif "sleep" in hook:
        pre_stop = float(hook["sleep"]["seconds"])
    termination = pod_spec()["terminationGracePeriodSeconds"]
    assert termination > pre_stop + settings.drain_seconds + settings.grace_seconds


def test_the_drain_outlasts_the_health_checks_that_take_a_replica_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stopping replica serves on with its health NOT_SERVING for --drain-seconds. Envoy
    (compose) and the readiness probe (Kubernetes) take it out only after their failure
    threshold of checks, up to ``interval x threshold`` after the stop; one more interval is
    left for the change to reach the callers (endpoints, ingress, Envoy's own update). With
    nothing left over, as with the 10 s drain the deployments once had, calls reached the
    replica after its port closed."""
    (check,) = envoy_cluster("referee")["health_checks"]
    interval = duration_seconds(str(check["interval"]))
    assert duration_seconds(str(check["timeout"])) < interval
    for name in referee_services():
        drain = effective_settings(referee_env(name), monkeypatch).drain_seconds
        assert drain >= interval * (int(check["unhealthy_threshold"]) + 1), (
            f"compose.yaml {name}: --drain-seconds {drain} leaves Envoy no slack"
        )
    probe = referee_container()["readinessProbe"]
    period = float(probe["periodSeconds"])
    drain = effective_settings(k8s_env(), monkeypatch).drain_seconds
    assert drain >= period * int(probe.get("failureThreshold", 3)) + period, (
        f"k8s: --drain-seconds {drain} leaves the readiness probe no slack"
    )


def test_k8s_runs_non_root() -> None:
    security = pod_spec()["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] != 0
    assert referee_container()["securityContext"]["allowPrivilegeEscalation"] is False


def all_k8s_documents() -> Iterator[dict[str, Any]]:
    for path in sorted(K8S.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            yield from load_yaml_documents(path)


def test_k8s_selectors_services_pdb_and_hpa_match_the_deployment() -> None:
    deployment = k8s("deployment.yaml")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    container_ports = {p["name"] for p in referee_container()["ports"]}
    services = [d for d in all_k8s_documents() if d["kind"] == "Service"]
    assert any(s["spec"].get("type", "ClusterIP") == "ClusterIP" for s in services)
    assert any(s["spec"].get("clusterIP") == "None" for s in services), "no headless Service"
    for service in services:
        assert service["spec"]["selector"].items() <= pod_labels.items()
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in container_ports
            if port["name"] == "grpc":
                assert port["port"] == GRPC_PORT
    pdb = k8s("pdb.yaml")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    hpa = k8s("hpa.yaml")
    assert hpa["apiVersion"] == "autoscaling/v2"
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert hpa["spec"]["minReplicas"] >= 2
    assert pdb["spec"]["minAvailable"] < hpa["spec"]["minReplicas"]
    resources = {m["resource"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Resource"}
    assert "cpu" in resources


def test_k8s_secret_holds_only_marked_placeholders() -> None:
    for key, value in secret_data().items():
        assert "PLACEHOLDER" in value, f"secret.yaml {key} must stay a marked placeholder"


# --- contract hygiene -----------------------------------------------------------------------------


def test_buf_is_pinned_and_wired_into_make_lint() -> None:
    tools = ROOT / "tools" / "buf"
    package = json.loads((tools / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((tools / "package-lock.json").read_text(encoding="utf-8"))
    pinned = package["devDependencies"]["@bufbuild/buf"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), "pin an exact buf version"
    assert lock["packages"]["node_modules/@bufbuild/buf"]["version"] == pinned
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^buf-lint:", makefile, re.MULTILINE)
    lint = re.search(r"^lint:(.*)$", makefile, re.MULTILINE)
    assert lint and "buf-lint" in lint.group(1), "`make lint` must run buf-lint"
