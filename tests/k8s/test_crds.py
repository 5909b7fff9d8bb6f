"""The KubeRay CRDs the validator reads are the repository's own copy (tests/k8s/crds)."""

import re
from pathlib import Path

from tests.k8s import validate

CRDS = Path(__file__).resolve().parent / "crds"


def test_the_validator_reads_the_vendored_crds_by_default(monkeypatch):
    monkeypatch.delenv("KUBERAY_CRDS", raising=False)
    assert validate.crd_dir() == CRDS
    assert {p.name for p in CRDS.glob("*.yaml")} == set(validate.CRD_FILES.values())


def test_each_vendored_crd_is_the_storage_version_of_its_kind_and_says_where_from():
    readme = (CRDS / "README.md").read_text()
    assert "KubeRay **v1.7.0**" in readme
    assert "github.com/ray-project/kuberay/tree/v1.7.0/ray-operator/config/crd/bases" in readme
    for kind, name in validate.CRD_FILES.items():
        text = (CRDS / name).read_text()
        assert re.match(rf"# Trimmed from KubeRay v1\.7\.0, .*/{re.escape(name)}", text), name
        assert name in readme
        crd = validate.yaml.safe_load(text)
        assert crd["spec"]["names"]["kind"] == kind
        (version,) = crd["spec"]["versions"]
        assert version["name"] == "v1" and version["storage"] is True
        schema = validate.schema(kind)
        assert schema["properties"]["apiVersion"] == {"const": "ray.io/v1"}
        assert schema["properties"]["spec"]["additionalProperties"] is False
