"""The part of ``kubectl kustomize`` that k8s/overlays use, so overlays can be rendered and
validated without kubectl: ``resources`` (files and kustomization folders), ``images``
(newName/newTag) and JSON 6902 ``patches`` (add, replace, remove) aimed by ``target``.
Anything else in a kustomization is an error here rather than a silent difference; where
kubectl is installed, tests/k8s/test_manifests.py checks the two render the same.
"""

from __future__ import annotations

from pathlib import Path

import yaml

KNOWN = {"apiVersion", "kind", "resources", "images", "patches"}


def render(folder: Path) -> list[dict]:
    kust = yaml.safe_load((folder / "kustomization.yaml").read_text())
    unknown = set(kust) - KNOWN
    if unknown:
        raise ValueError(f"{folder}/kustomization.yaml: not handled here: {sorted(unknown)}")
    docs: list[dict] = []
    for entry in kust.get("resources", []):
        path = folder / entry
        if path.is_dir():
            docs += render(path)
        else:
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    for image in kust.get("images", []):
        for doc in docs:
            _set_image(doc, image)
    for patch in kust.get("patches", []):
        hits = [d for d in docs if _targets(patch["target"], d)]
        if not hits:
            raise ValueError(f"{folder}: patch target {patch['target']} matches nothing")
        for doc in hits:
            for op in yaml.safe_load(patch["patch"]):
                _apply(doc, op)
    return docs


def _targets(target: dict, doc: dict) -> bool:
    group, _, version = doc["apiVersion"].rpartition("/")
    have = {"group": group, "version": version, "kind": doc["kind"]}
    have["name"] = doc["metadata"]["name"]
    return all(have[k] == v for k, v in target.items())


def _set_image(node, image: dict) -> None:
    if isinstance(node, list):
        for n in node:
            _set_image(n, image)
    elif isinstance(node, dict):
        ref = node.get("image")
        if isinstance(ref, str) and ref.split(":")[0] == image["name"]:
            name, _, tag = ref.partition(":")
            tag = image.get("newTag", tag)
            node["image"] = image.get("newName", name) + (f":{tag}" if tag else "")
        for v in node.values():
            _set_image(v, image)


def _apply(doc: dict, op: dict) -> None:
    *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
    node = doc
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    key = (len(node) if last == "-" else int(last)) if isinstance(node, list) else last
    if op["op"] == "remove":
        del node[key]
    elif op["op"] == "replace":
        node[key]  # noqa: B018 - replace needs an existing member (KeyError/IndexError if not)
        node[key] = op["value"]
    elif op["op"] == "add":
        if isinstance(node, list):
            node.insert(key, op["value"])
        else:
            node[key] = op["value"]
    else:
        raise ValueError(f"JSON patch op {op['op']!r} is not handled here")
