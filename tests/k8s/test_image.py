"""What can be checked of k8s/Dockerfile without Docker: the base image is Ray's own at the
version the project pins and runs, torch is the Makefile's pin, what it copies exists, what it
leaves out stays out, and the manifests run the images it builds as the user it has."""

import re
import tomllib
from pathlib import Path

import ray
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "k8s" / "Dockerfile").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def arg_default(name: str) -> str:
    return re.search(rf"^ARG {name}=(\S+)$", DOCKERFILE, re.M).group(1)


def pin(package: str) -> str:
    (spec,) = [d for d in PYPROJECT["project"]["dependencies"] if re.match(rf"{package}\b", d)]
    return spec.split("==")[1]


def test_base_image_is_rays_at_the_pinned_version():
    assert re.search(
        r"^FROM rayproject/ray:\$\{RAY_VERSION\}-py311-\$\{VARIANT\}$", DOCKERFILE, re.M
    )
    version = arg_default("RAY_VERSION")
    assert version == ray.__version__
    assert re.fullmatch(pin("ray").replace(".", r"\.").replace("*", r"\d+"), version)
    assert arg_default("VARIANT") == "cpu"
    assert PYPROJECT["project"]["requires-python"].startswith(">=3.11,<3.12")  # py311


def test_torch_is_the_projects_pin_and_cpu_only_on_the_cpu_image():
    wanted = pin("torch")
    assert set(re.findall(r"torch==([0-9.]+)", DOCKERFILE)) == {wanted}
    assert "download.pytorch.org/whl/cpu" in DOCKERFILE


def test_every_copied_path_exists_and_the_ignore_file_keeps_local_state_out():
    for line in re.findall(r"^COPY (.+)$", DOCKERFILE, re.M):
        *sources, _dest = [w for w in line.split() if not w.startswith("--")]
        for src in sources:
            assert (ROOT / src).exists(), src
    ignored = (ROOT / "k8s" / "Dockerfile.dockerignore").read_text().split()
    assert {".git", ".venv", "runs", "bench/.smax-venv", "bench/.jaxmarl-venv"} <= set(ignored)


def test_manifests_run_the_images_this_builds_as_its_user():
    version = PYPROJECT["project"]["version"]
    workdir = re.search(r"^WORKDIR (\S+)$", DOCKERFILE, re.M).group(1)
    assert workdir == "/home/ray/arena"
    assert "USER ray" in DOCKERFILE  # uid 1000 in rayproject/ray
    spec = yaml.safe_load((ROOT / "k8s/base/raycluster.yaml").read_text())["spec"]
    pods = [spec["headGroupSpec"]] + spec["workerGroupSpecs"]
    images = {c["image"] for p in pods for c in p["template"]["spec"]["containers"]}
    assert images == {f"arena:{version}-cpu", f"arena:{version}-gpu"}
    for p in pods:
        assert p["template"]["spec"]["securityContext"]["runAsUser"] == 1000
        mounts = p["template"]["spec"]["containers"][0]["volumeMounts"]
        assert {"name": "runs", "mountPath": f"{workdir}/runs"} in mounts
