"""Every manifest in k8s/ (and every overlay, rendered) against the KubeRay CRDs, the operator's
rules and Ray Serve's schema; a planted error of each kind is caught with a clear message;
and the project's own rules: one Ray version, requests = limits, non-root pods, probes, one
cluster spec for RayCluster, RayJob and RayService, the serve config of serve/config.yaml,
and a RayJob entrypoint that the arena CLI accepts."""

import copy
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import ray
import yaml

from tests.k8s import kustomize, validate

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
OVERLAYS = sorted(p.parent for p in (K8S / "overlays").glob("*/kustomization.yaml"))
RUNS_MOUNT = "/home/ray/arena/runs"


def load(name: str) -> dict:
    (doc,) = [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]
    return doc


def manifests() -> dict[str, dict]:
    """Every KubeRay object: the files as written and each overlay as rendered."""
    found = {}
    for path in sorted(K8S.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("apiVersion", "").startswith("ray.io/"):
                found[str(path.relative_to(ROOT))] = doc
    for overlay in OVERLAYS:
        for doc in kustomize.render(overlay):
            if doc["apiVersion"].startswith("ray.io/"):
                found[f"{overlay.relative_to(ROOT)} ({doc['kind']})"] = doc
    return found


MANIFESTS = manifests()


def cluster_specs(doc: dict) -> list[dict]:
    spec = doc["spec"]
    return (
        [spec]
        if doc["kind"] == "RayCluster"
        else [spec.get("rayClusterSpec") or spec["rayClusterConfig"]]
    )


def pod_specs(doc: dict):
    """(where, pod spec) of the head and every worker group."""
    for spec in cluster_specs(doc):
        if "headGroupSpec" in spec:
            yield "head", spec["headGroupSpec"]["template"]["spec"]
            for g in spec.get("workerGroupSpecs", []):
                yield g["groupName"], g["template"]["spec"]


def test_the_crds_are_there_and_say_so_when_not(tmp_path, monkeypatch):
    assert validate.crd_dir().is_dir()
    monkeypatch.setenv("KUBERAY_CRDS", str(tmp_path))
    with pytest.raises(validate.ManifestError, match=f"KubeRay CRDs not found in {tmp_path}"):
        validate.crd_dir()


def test_every_manifest_kind_is_covered():
    kinds = {d["kind"] for d in MANIFESTS.values()}
    assert kinds == {"RayCluster", "RayJob", "RayService"}
    assert len(OVERLAYS) >= 2


@pytest.mark.parametrize("where", sorted(MANIFESTS))
def test_manifest_is_valid(where):
    assert validate.errors(MANIFESTS[where]) == []


@pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
@pytest.mark.parametrize("overlay", OVERLAYS, ids=lambda p: p.name)
def test_overlay_renders_as_kubectl_kustomize_does(overlay):
    out = subprocess.run(
        ["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr

    def key(d):
        return d["kind"], d["metadata"]["name"]

    theirs = sorted(yaml.safe_load_all(out.stdout), key=key)
    assert theirs == sorted(kustomize.render(overlay), key=key)


def _set(path: str, value):
    def mutate(doc):
        *parents, last = path.split(".")
        node = doc
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        if value is DELETE:
            del node[int(last) if last.isdigit() else last]
        else:
            node[int(last) if last.isdigit() else last] = value

    return mutate


DELETE = object()
CLUSTER = "base/raycluster.yaml"
JOB = "rayjob-train.yaml"
SERVICE = "rayservice.yaml"
W0 = "spec.workerGroupSpecs.0"
JW0 = "spec.rayClusterSpec.workerGroupSpecs.0"


def _serve_config(change):
    def mutate(doc):
        config = yaml.safe_load(doc["spec"]["serveConfigV2"])
        change(config)
        doc["spec"]["serveConfigV2"] = yaml.safe_dump(config)

    return mutate


def _resources_twice(doc):
    group = doc["spec"]["workerGroupSpecs"][0]
    group["rayStartParams"] = {"num-cpus": "4"}
    group["resources"] = {"CPU": "4"}


PLANTED = [
    # schema
    ("unknown field", CLUSTER, _set(f"{W0}.maxReplica", 3), "'maxReplica' was unexpected"),
    ("wrong type", CLUSTER, _set(f"{W0}.minReplicas", "0"), "'0' is not of type 'integer'"),
    ("bad enum", CLUSTER, _set("spec.autoscalerOptions.version", "v3"), "'v3' is not one of"),
    ("missing field", CLUSTER, _set(f"{W0}.groupName", DELETE), "'groupName' is a required"),
    ("old apiVersion", JOB, _set("apiVersion", "ray.io/v1alpha1"), "'ray.io/v1' was expected"),
    ("pod typo", JOB, _set(f"{JW0}.template.spec.containers.0.imag", "x"), "'imag' was unexpected"),
    # operator rules
    ("long cluster name", CLUSTER, _set("metadata.name", "a" * 54), "at most 53 allowed"),
    ("long job name", JOB, _set("metadata.name", "a" * 48), "at most 47 allowed"),
    ("long service name", SERVICE, _set("metadata.name", "a" * 48), "at most 47 allowed"),
    ("not DNS-1035", CLUSTER, _set("metadata.name", "1arena"), "not a DNS-1035 label"),
    ("upper case name", SERVICE, _set("metadata.name", "Arena"), "not a DNS-1035 label"),
    ("min > max", CLUSTER, _set(f"{W0}.minReplicas", 5), "minReplicas 5 > maxReplicas 4"),
    ("min > max in job", JOB, _set(f"{JW0}.minReplicas", 5), "minReplicas 5 > maxReplicas 4"),
    (
        "ttl without shutdown",
        JOB,
        _set("spec.shutdownAfterJobFinishes", False),
        "ttlSecondsAfterFinished: needs shutdownAfterJobFinishes: true",
    ),
    (
        "no cluster",
        JOB,
        _set("spec.rayClusterSpec", DELETE),
        "needs rayClusterSpec or clusterSelector",
    ),
    (
        "idle timeout without v2",
        CLUSTER,
        _set("spec.autoscalerOptions.version", "v1"),
        "per-group idle timeout (group 'gpu') needs autoscaler v2",
    ),
    (
        "restart policy with v2",
        CLUSTER,
        _set(f"{W0}.template.spec.restartPolicy", "Always"),
        "autoscaler v2 needs Never",
    ),
    ("resources twice", CLUSTER, _resources_twice, "both rayStartParams and resources"),
    (
        "token auth on old Ray",
        CLUSTER,
        _set("spec.rayVersion", "2.51.0"),
        "'token' needs rayVersion 2.52.0 or later",
    ),
    ("runtime env", JOB, _set("spec.runtimeEnvYAML", "env_vars: [a"), "runtimeEnvYAML: not valid"),
    (
        "duplicate group",
        CLUSTER,
        _set("spec.workerGroupSpecs.1.groupName", "cpu"),
        "more than once",
    ),
    # Serve's own schema
    (
        "serve: bad replicas",
        SERVICE,
        _serve_config(lambda c: c["applications"][0]["deployments"][0].update(num_replicas=-1)),
        "serveConfigV2.applications.0.deployments.0.num_replicas",
    ),
    (
        "serve: unknown key",
        SERVICE,
        _serve_config(lambda c: c["applications"][0].update(import_pth="x")),
        "serveConfigV2.applications.0.import_pth: not a field of ServeApplicationSchema",
    ),
    (
        "serve: deployment typo",
        SERVICE,
        _serve_config(lambda c: c["applications"][0]["deployments"][0].update(num_replica=2)),
        "deployments.0.num_replica: not a field of DeploymentSchema",
    ),
    (
        "serve: no import path",
        SERVICE,
        _serve_config(lambda c: c["applications"][0].pop("import_path")),
        "serveConfigV2.applications.0.import_path: Field required",
    ),
]


@pytest.mark.parametrize("what, name, mutate, message", PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_error_fails_with_a_clear_message(what, name, mutate, message):
    doc = copy.deepcopy(load(name))
    assert validate.errors(doc) == []
    mutate(doc)
    found = validate.errors(doc)
    assert any(message in e for e in found), found


def test_validate_cli_names_file_object_and_field(tmp_path, capsys):
    doc = load(CLUSTER)
    doc["spec"]["workerGroupSpecs"][0]["maxReplicas"] = -1
    doc["spec"]["workerGroupSpecs"][0]["minReplicas"] = 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    assert validate.main([str(bad)]) == 1
    assert f"{bad}: RayCluster 'arena': spec.workerGroupSpecs[0]" in capsys.readouterr().out
    assert validate.main([str(K8S / JOB)]) == 0


# The project's own rules.


def test_one_ray_version_everywhere():
    for where, doc in MANIFESTS.items():
        for spec in cluster_specs(doc):
            assert spec["rayVersion"] == ray.__version__, where


@pytest.mark.parametrize("where", sorted(MANIFESTS))
def test_pods_are_guaranteed_non_root_and_probed(where):
    doc = MANIFESTS[where]
    for spec in cluster_specs(doc):
        res = spec["autoscalerOptions"]["resources"]
        assert res["requests"] == res["limits"], f"{where}: autoscaler"
    for group, pod in pod_specs(doc):
        at = f"{where}: {group}"
        assert pod["securityContext"]["runAsNonRoot"] is True, at
        assert pod["securityContext"]["runAsUser"] == 1000, at
        assert pod.get("restartPolicy") == "Never", at
        claims = {
            v["persistentVolumeClaim"]["claimName"]
            for v in pod["volumes"]
            if "persistentVolumeClaim" in v
        }
        assert claims == {"arena-runs"}, at
        for c in pod["containers"]:
            assert c["resources"]["requests"] == c["resources"]["limits"], at
            assert c["securityContext"]["allowPrivilegeEscalation"] is False, at
            assert c["readinessProbe"]["httpGet"] == {"path": "/api/healthz", "port": 52365}, at
            assert c["livenessProbe"]["httpGet"] == c["readinessProbe"]["httpGet"], at
            assert {"name": "runs", "mountPath": RUNS_MOUNT} in c["volumeMounts"], at


def test_head_schedules_nothing_and_groups_are_cpu_and_gpu():
    spec = load(CLUSTER)["spec"]
    assert spec["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    assert spec["enableInTreeAutoscaling"] and spec["autoscalerOptions"]["version"] == "v2"
    cpu, gpu = spec["workerGroupSpecs"]
    assert cpu["groupName"] == "cpu" and cpu["minReplicas"] == 0 < cpu["maxReplicas"]
    limits = gpu["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert gpu["groupName"] == "gpu" and gpu["minReplicas"] == 0 and limits["nvidia.com/gpu"] == "1"
    assert gpu["template"]["spec"]["containers"][0]["image"].endswith("-gpu")
    assert cpu["template"]["spec"]["containers"][0]["image"].endswith("-cpu")


def test_every_cluster_has_token_auth():
    """The job API runs any code it is given: no cluster of ours leaves it open."""
    for name, key in ((CLUSTER, None), (JOB, "rayClusterSpec"), (SERVICE, "rayClusterConfig")):
        spec = load(name)["spec"]
        assert (spec[key] if key else spec)["authOptions"] == {"mode": "token"}, name


def test_job_and_service_run_the_same_cluster_as_raycluster():
    base = load(CLUSTER)["spec"]
    assert load(JOB)["spec"]["rayClusterSpec"] == base
    assert load(SERVICE)["spec"]["rayClusterConfig"] == base


def test_rayjob_entrypoint_is_a_valid_arena_training():
    from arena import cli
    from training.config import TrainConfig, apply_overrides

    spec = load(JOB)["spec"]
    argv = shlex.split(spec["entrypoint"])
    assert argv[0] == "arena"
    args = cli.parser().parse_args(argv[1:])
    assert args.command == "train" and args.out == RUNS_MOUNT
    cfg = TrainConfig(env=args.env, algo=args.algo, timesteps=args.timesteps)
    cfg.env_runners = args.env_runners
    cfg.learners, cfg.gpus_per_learner = args.learners, args.gpus_per_learner
    apply_overrides(cfg, args.set or [])
    cfg.validate()
    # The Learner goes to the gpu group: one GPU per Learner, as one gpu pod has.
    gpu = spec["rayClusterSpec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]
    assert cfg.learners >= 1 and cfg.gpus_per_learner == 1
    assert int(gpu["resources"]["limits"]["nvidia.com/gpu"]) >= cfg.gpus_per_learner
    # The driver and its EnvRunners fit one CPU worker, so one pod serves the whole job.
    cpus = spec["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    assert spec["entrypointNumCpus"] + cfg.env_runners <= int(cpus["resources"]["limits"]["cpu"])


def test_rayservice_serves_serve_config_yaml():
    """serveConfigV2 is serve/config.yaml but for where the runs are read from."""
    ours = yaml.safe_load((ROOT / "serve" / "config.yaml").read_text())
    theirs = yaml.safe_load(load(SERVICE)["spec"]["serveConfigV2"])
    for mine, deployed in zip(ours["applications"], theirs["applications"], strict=True):
        runs = deployed["args"].pop("runs")
        assert runs == [
            f"{RUNS_MOUNT}/{Path(r).relative_to('runs')}" for r in mine["args"].pop("runs")
        ]
    assert theirs == ours
    head = load(SERVICE)["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
    ports = {p["name"]: p["containerPort"] for p in head["containers"][0]["ports"]}
    assert ports["serve"] == theirs["http_options"]["port"]
