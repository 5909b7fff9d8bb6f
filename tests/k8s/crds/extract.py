"""Writes the trimmed KubeRay CRDs of this folder from the upstream ones.

    python tests/k8s/crds/extract.py KUBERAY/ray-operator/config/crd/bases   # rewrite them
    python tests/k8s/crds/extract.py --check KUBERAY/ray-operator/config/crd/bases

Each upstream ``ray.io_*.yaml`` keeps its CRD skeleton (group, names, scope) and only its
storage version, whose ``openAPIV3Schema`` loses its ``description`` annotations and nothing
else. ``--check`` verifies that the files here are exactly that and that the strict schema
``tests/k8s/validate.py`` builds from them equals the one it builds from upstream with the
descriptions removed: the validation is the same.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
FILES = ("ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml", "ray.io_rayservices.yaml")
HEADER = (
    "# Trimmed from KubeRay v1.7.0, ray-operator/config/crd/bases/{name} (Apache-2.0):\n"
    "# the storage version only, schema descriptions removed. See README.md beside this file.\n"
)
# Keywords whose value is a map of names to schemas, one schema, or a list of schemas.
SCHEMA_MAPS = ("properties", "patternProperties", "definitions")
SCHEMA_ONE = ("additionalProperties", "items", "not")
SCHEMA_LIST = ("allOf", "anyOf", "oneOf", "items")


def strip(schema):
    """``schema`` without its ``description`` keywords (a field named "description" stays)."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "description":
            continue
        if key in SCHEMA_MAPS and isinstance(value, dict):
            value = {name: strip(sub) for name, sub in value.items()}
        elif key in SCHEMA_LIST and isinstance(value, list):
            value = [strip(sub) for sub in value]
        elif key in SCHEMA_ONE and isinstance(value, dict):
            value = strip(value)
        out[key] = value
    return out


def trim(crd: dict) -> dict:
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    return {
        "apiVersion": crd["apiVersion"],
        "kind": crd["kind"],
        "metadata": {"name": crd["metadata"]["name"], **_annotations(crd)},
        "spec": {
            "group": crd["spec"]["group"],
            "names": crd["spec"]["names"],
            "scope": crd["spec"]["scope"],
            "versions": [
                {
                    "name": version["name"],
                    "served": version["served"],
                    "storage": True,
                    "schema": {"openAPIV3Schema": strip(version["schema"]["openAPIV3Schema"])},
                }
            ],
        },
    }


def _annotations(crd: dict) -> dict:
    annotations = crd["metadata"].get("annotations")
    return {"annotations": annotations} if annotations else {}


def load(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def dump(crd: dict, name: str) -> str:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    body = yaml.dump(crd, Dumper=dumper, sort_keys=False, width=100)
    return HEADER.format(name=name) + body


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("upstream", type=Path, help="KubeRay's ray-operator/config/crd/bases")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE.parents[2]))
    from tests.k8s import validate

    bad = 0
    for name in FILES:
        want = trim(load(args.upstream / name))
        if not args.check:
            (HERE / name).write_text(dump(want, name))
            continue
        have = load(HERE / name)
        full = load(args.upstream / name)
        (version,) = [v for v in full["spec"]["versions"] if v.get("storage")]
        (ours,) = have["spec"]["versions"]
        same_schema = validate._strict(strip(version["schema"]["openAPIV3Schema"])) == (
            validate._strict(ours["schema"]["openAPIV3Schema"])
        )
        ok = have == want and same_schema
        bad += not ok
        print(f"{name}: {'same' if ok else 'DIFFERENT'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
