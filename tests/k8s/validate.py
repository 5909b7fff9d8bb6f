"""Offline validation of KubeRay manifests: what ``kubectl apply`` and the KubeRay operator would
reject, without a cluster.

    python -m tests.k8s.validate k8s/rayjob-train.yaml ...   # prints each error, exits 1 on any

1. The schema: the ``openAPIV3Schema`` of the CRD's storage version (KubeRay v1.7.0's, kept
   in ``tests/k8s/crds``, see its README.md; ``KUBERAY_CRDS`` may name another folder), made
   strict as ``kubectl apply`` (``--validate=strict``, its default) is: an unknown field is
   an error, not silently pruned. CEL rules (``x-kubernetes-validations``) are not evaluated;
   in KubeRay v1.7 they guard immutable fields and ``managedBy``/``deletionStrategy``, none
   of which these manifests set.
2. The operator's own rules, which the schema cannot express (ray-operator's
   ``utils/validation.go``): name lengths and DNS-1035 names, min <= max replicas, resources
   in ``rayStartParams`` or ``resources`` but not both, autoscaler v2 settings, RayJob
   deletion and cluster rules.
3. A RayService's ``serveConfigV2`` against Ray Serve's own ``ServeDeploySchema``.
"""

from __future__ import annotations

import copy
import functools
import os
import re
import sys
import typing
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRDS = Path(__file__).resolve().parent / "crds"
CRD_FILES = {
    "RayCluster": "ray.io_rayclusters.yaml",
    "RayJob": "ray.io_rayjobs.yaml",
    "RayService": "ray.io_rayservices.yaml",
}
# KubeRay: 63 (a DNS label) minus the longest suffix the operator appends to a cluster's
# services ("-serve-svc"); RayJob and RayService names get 6 more characters for their cluster.
MAX_NAME = {"RayCluster": 53, "RayJob": 47, "RayService": 47}
DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
RAY_START_RESOURCE_KEYS = ("num-cpus", "num-gpus", "memory", "resources")


class ManifestError(ValueError):
    """The CRDs cannot be found or read."""


def crd_dir() -> Path:
    path = Path(os.environ.get("KUBERAY_CRDS") or CRDS)
    if not all((path / f).is_file() for f in CRD_FILES.values()):
        raise ManifestError(
            f"KubeRay CRDs not found in {path} (need {', '.join(CRD_FILES.values())}); "
            "set KUBERAY_CRDS to a folder holding them"
        )
    return path


def _strict(node: Any) -> Any:
    """OpenAPI v3 structural schema -> JSON Schema with unknown fields rejected."""
    if isinstance(node, list):
        return [_strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) for k, v in node.items()}
    if out.pop("nullable", False) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    preserve = out.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    return out


@functools.cache
def schema(kind: str) -> dict:
    """The strict schema of ``kind``'s storage version."""
    # libyaml when present: the CRDs are megabytes of YAML.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load((crd_dir() / CRD_FILES[kind]).read_text(), Loader=loader)
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    s = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    s["properties"]["apiVersion"] = {"const": f"{crd['spec']['group']}/{version['name']}"}
    s["required"] = sorted({*s.get("required", []), "apiVersion", "kind", "metadata", "spec"})
    return s


def _where(path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out.lstrip(".") or "(top level)"


def schema_errors(doc: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(schema(doc["kind"]))
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    return [f"{_where(e.absolute_path)}: {e.message}" for e in errors]


def _name_errors(kind: str, name: str) -> list[str]:
    errors = []
    if len(name) > MAX_NAME[kind]:
        errors.append(
            f"metadata.name: {kind} name {name!r} has {len(name)} characters, "
            f"at most {MAX_NAME[kind]} allowed"
        )
    if not DNS1035.fullmatch(name):
        errors.append(
            f"metadata.name: {kind} name {name!r} is not a DNS-1035 label (lower case letters, "
            "digits and '-', starting with a letter and ending with a letter or digit)"
        )
    return errors


def _head_env(spec: dict) -> dict[str, str]:
    containers = spec["headGroupSpec"]["template"]["spec"].get("containers") or [{}]
    return {e["name"]: e.get("value", "") for e in containers[0].get("env", [])}


def cluster_spec_errors(spec: dict, where: str) -> list[str]:
    """KubeRay's ValidateRayClusterSpec rules."""
    errors = []
    head = spec["headGroupSpec"]
    workers = spec.get("workerGroupSpecs", [])
    if not head["template"]["spec"].get("containers"):
        errors.append(f"{where}.headGroupSpec: the head needs at least one container")
    groups = [("headGroupSpec", "head", head)] + [
        (f"workerGroupSpecs[{i}]", w.get("groupName", "?"), w) for i, w in enumerate(workers)
    ]
    names = [w.get("groupName") for w in workers]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        errors.append(f"{where}.workerGroupSpecs: groupName {dup!r} is used more than once")
    for path, name, group in groups:
        at = f"{where}.{path}"
        if group is not head and not group["template"]["spec"].get("containers"):
            errors.append(f"{at}: worker group {name!r} needs at least one container")
        params = group.get("rayStartParams", {})
        if any(params.get(k) for k in RAY_START_RESOURCE_KEYS) and group.get("resources"):
            errors.append(
                f"{at}: resources are set in both rayStartParams and resources for group "
                f"{name!r}; use only one"
            )
        if "labels" in params:
            errors.append(f"{at}.rayStartParams: 'labels' is not supported; use {path}.labels")
        if group is not head:
            lo, hi = group.get("minReplicas", 0), group.get("maxReplicas", 2**31 - 1)
            if lo > hi:
                errors.append(
                    f"{at}: worker group {name!r} has minReplicas {lo} > maxReplicas {hi}"
                )

    autoscaling = bool(spec.get("enableInTreeAutoscaling"))
    version = (spec.get("autoscalerOptions") or {}).get("version")
    env_v2 = _head_env(spec).get("RAY_enable_autoscaler_v2")
    v2 = autoscaling and (version == "v2" or (version is None and env_v2 in ("1", "true")))
    if not autoscaling and env_v2 in ("1", "true"):
        errors.append(
            f"{where}: RAY_enable_autoscaler_v2={env_v2} in the head needs "
            "enableInTreeAutoscaling: true"
        )
    if autoscaling and version is not None and env_v2 is not None:
        errors.append(
            f"{where}: both autoscalerOptions.version and the head's RAY_enable_autoscaler_v2 "
            "are set; use only autoscalerOptions.version"
        )
    for path, name, group in groups:
        policy = group["template"]["spec"].get("restartPolicy")
        if v2 and policy not in (None, "Never"):
            errors.append(
                f"{where}.{path}.template.spec.restartPolicy: {policy!r} for group {name!r}; "
                "autoscaler v2 needs Never (or unset)"
            )
        if group is not head and group.get("idleTimeoutSeconds") is not None and not v2:
            errors.append(
                f"{where}.{path}.idleTimeoutSeconds: a per-group idle timeout (group {name!r}) "
                "needs autoscaler v2 (enableInTreeAutoscaling: true and "
                "autoscalerOptions.version: v2)"
            )
        if autoscaling and group.get("suspend"):
            errors.append(f"{where}.{path}: group {name!r} cannot be suspended with autoscaling")
    if (spec.get("authOptions") or {}).get("mode") == "token":
        version = spec.get("rayVersion")
        try:
            too_old = tuple(int(x) for x in version.split(".")[:3]) < (2, 52, 0)
        except (AttributeError, ValueError):
            too_old = True
        if too_old:
            errors.append(
                f"{where}.authOptions.mode: 'token' needs rayVersion 2.52.0 or later, "
                f"got {version!r}"
            )
    return errors


def rayjob_errors(job: dict) -> list[str]:
    """KubeRay's ValidateRayJobSpec rules."""
    spec, errors = job["spec"], []
    shutdown = bool(spec.get("shutdownAfterJobFinishes"))
    ttl = spec.get("ttlSecondsAfterFinished", 0)
    if ttl < 0:
        errors.append("spec.ttlSecondsAfterFinished: must be a non-negative integer")
    if ttl > 0 and not shutdown:
        errors.append(
            "spec.ttlSecondsAfterFinished: needs shutdownAfterJobFinishes: true (the TTL "
            "counts from the cluster's shutdown)"
        )
    if spec.get("suspend") and not shutdown:
        errors.append("spec.suspend: a RayJob without shutdownAfterJobFinishes cannot be suspended")
    selector = spec.get("clusterSelector") or {}
    if "rayClusterSpec" not in spec and not selector:
        errors.append("spec: a RayJob needs rayClusterSpec or clusterSelector")
    if selector and not selector.get("ray.io/cluster"):
        errors.append("spec.clusterSelector: needs a non-empty ray.io/cluster")
    if selector and spec.get("submissionMode") == "SidecarMode":
        errors.append("spec.clusterSelector: not supported with submissionMode SidecarMode")
    if (spec.get("activeDeadlineSeconds") or 1) <= 0:
        errors.append("spec.activeDeadlineSeconds: must be a positive integer")
    if spec.get("backoffLimit", 0) < 0:
        errors.append("spec.backoffLimit: must be a non-negative integer")
    if spec.get("submissionMode") == "InteractiveMode" and spec.get("backoffLimit", 0) > 0:
        errors.append("spec.backoffLimit: incompatible with submissionMode InteractiveMode")
    try:
        env = yaml.safe_load(spec.get("runtimeEnvYAML") or "{}")
        if not isinstance(env, dict):
            errors.append("spec.runtimeEnvYAML: must be a YAML mapping")
    except yaml.YAMLError as e:
        errors.append(f"spec.runtimeEnvYAML: not valid YAML: {e}")
    if "rayClusterSpec" in spec:
        errors += cluster_spec_errors(spec["rayClusterSpec"], "spec.rayClusterSpec")
    return errors


def serve_config_errors(text: str, where: str) -> list[str]:
    """``text`` against Ray Serve's ServeDeploySchema (what ``serve deploy`` accepts)."""
    from pydantic import ValidationError
    from ray.serve.schema import ServeDeploySchema

    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as e:
        return [f"{where}: not valid YAML: {e}"]
    try:
        ServeDeploySchema.model_validate(config)
    except ValidationError as e:
        return [
            f"{where}.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()
        ]
    return _unknown_keys(ServeDeploySchema, config, where)


def _models(annotation) -> list:
    """The pydantic models inside a field's type (``Optional[List[Model]]`` -> ``[Model]``)."""
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _unknown_keys(model, data, where: str) -> list[str]:
    """Keys the Serve schema does not declare. Serve ignores them (pydantic's default), so a
    typo such as ``num_replica`` would deploy with the default in silence."""
    if isinstance(data, list):
        return [e for i, d in enumerate(data) for e in _unknown_keys(model, d, f"{where}.{i}")]
    if not isinstance(data, dict):
        return []
    fields = {f.alias or name: f for name, f in model.model_fields.items()}
    errors = [
        f"{where}.{key}: not a field of {model.__name__} (Serve would ignore it); "
        f"allowed: {', '.join(sorted(fields))}"
        for key in data
        if key not in fields
    ]
    for key, value in data.items():
        if key in fields:
            for sub in _models(fields[key].annotation)[:1]:
                errors += _unknown_keys(sub, value, f"{where}.{key}")
    return errors


def rayservice_errors(svc: dict) -> list[str]:
    """KubeRay's ValidateRayServiceSpec rules and the Serve config."""
    spec = svc["spec"]
    errors = cluster_spec_errors(spec["rayClusterConfig"], "spec.rayClusterConfig")
    head_svc = spec["rayClusterConfig"]["headGroupSpec"].get("headService") or {}
    if (head_svc.get("metadata") or {}).get("name"):
        errors.append(
            "spec.rayClusterConfig.headGroupSpec.headService.metadata.name: must not be set"
        )
    if (spec.get("rayClusterDeletionDelaySeconds") or 0) < 0:
        errors.append("spec.rayClusterDeletionDelaySeconds: must be a non-negative integer")
    if "serveConfigV2" not in spec:
        errors.append("spec.serveConfigV2: missing (the Serve applications to deploy)")
    else:
        errors += serve_config_errors(spec["serveConfigV2"], "spec.serveConfigV2")
    return errors


def errors(doc: Any) -> list[str]:
    """Every problem with one manifest; empty when it would be accepted."""
    if not isinstance(doc, dict) or doc.get("kind") not in CRD_FILES:
        kind = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
        return [f"kind: {kind!r} is not one of {', '.join(CRD_FILES)}"]
    found = schema_errors(doc)
    if found:  # the operator's rules assume a well-formed object
        return found
    kind = doc["kind"]
    found = _name_errors(kind, doc["metadata"].get("name", ""))
    if kind == "RayCluster":
        found += cluster_spec_errors(doc["spec"], "spec")
    elif kind == "RayJob":
        found += rayjob_errors(doc)
    else:
        found += rayservice_errors(doc)
    return found


def validate_file(path: Path) -> list[str]:
    """Errors of every KubeRay object in a (multi-document) YAML file, each named."""
    out = []
    for doc in yaml.safe_load_all(Path(path).read_text()):
        if isinstance(doc, dict) and doc.get("apiVersion", "").startswith("ray.io/"):
            name = f"{doc.get('kind')} {doc.get('metadata', {}).get('name')!r}"
            out += [f"{path}: {name}: {e}" for e in errors(doc)]
    return out


def main(argv: list[str]) -> int:
    problems = [e for p in argv for e in validate_file(Path(p))]
    for p in problems:
        print(p)
    print(f"{len(argv)} files, {len(problems)} errors", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
