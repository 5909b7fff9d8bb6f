"""The node provider behind a local autoscaling cluster (:class:`cluster.local.Autoscaling`).

Ray's autoscaler asks a node provider for machines; on Kubernetes that is KubeRay, which makes
pods. Here it is Ray's own fake multi-node provider, which starts each "node" as a real raylet
(with its agents and workers) on this machine, with the resources the node type declares. Ray
names it ``fake_multinode``, but the pip wheel lacks the default config that provider type
loads, so it is plugged in as an ``external`` provider: this module.

Three changes to it, all making a node more like a pod:
- every node has its own temp dir, as every pod has its own filesystem. Nodes that share the
  head's temp dir share one runtime-env cache, and one node's cache cleanup deletes the working
  dir that a job's driver runs in on another (measured: the driver failed with
  ``FileNotFoundError`` from ``os.getcwd()``);
- every node has its own IP on the loopback network (127.0.0.2, 127.0.0.3, ...), as every pod
  has its own. With one IP for all, the dashboard finds a job's logs on the wrong node;
- every node's temp dir names the cluster's GCS (``ray_current_cluster``, as ``ray start``
  writes on a pod). Without it, a job's driver on the node resolves ``auto`` to any GCS it
  finds on the host, another Ray's when one runs beside the cluster (measured: the driver
  hung, trying to reach another Ray's GCS).
"""

from __future__ import annotations

import copy
import json
import os

from ray._private import ray_constants
from ray._private.node import Node
from ray._private.parameter import RayParams
from ray._private.utils import write_ray_address
from ray.autoscaler._private.fake_multi_node.node_provider import FakeMultiNodeProvider
from ray.autoscaler.tags import (
    NODE_KIND_WORKER,
    STATUS_UP_TO_DATE,
    TAG_RAY_NODE_KIND,
    TAG_RAY_NODE_NAME,
    TAG_RAY_NODE_STATUS,
    TAG_RAY_USER_NODE_TYPE,
)


class LocalNodeProvider(FakeMultiNodeProvider):
    """Worker nodes as raylets on this machine, each under ``node_temp_root/<n>``."""

    def _create_node_with_resources_and_labels(self, node_config, tags, count, resources, labels):
        resources = copy.deepcopy(resources)
        with self.lock:
            node_id = self._next_hex_node_id()
            node_type = tags[TAG_RAY_USER_NODE_TYPE]
            temp_dir = os.path.join(self.provider_config["node_temp_root"], node_id[-5:])
            os.makedirs(temp_dir, exist_ok=True)
            write_ray_address(self._gcs_address, temp_dir)
            params = RayParams(
                node_ip_address=f"127.0.0.{1 + int(node_id[-5:])}",
                temp_dir=temp_dir,
                gcs_address=self._gcs_address,
                redis_address=self._gcs_address,
                min_worker_port=0,
                max_worker_port=0,
                dashboard_port=None,
                dashboard_agent_listen_port=0,
                num_cpus=resources.pop("CPU", 0),
                num_gpus=resources.pop("GPU", 0),
                object_store_memory=resources.pop("object_store_memory", None),
                resources=resources,
                labels=labels,
                # What the autoscaler (v2) matches a Ray node to its instance by.
                env_vars={
                    "RAY_OVERRIDE_NODE_ID_FOR_TESTING": node_id,
                    "RAY_CLOUD_INSTANCE_ID": node_id,
                    "RAY_NODE_TYPE_NAME": node_type,
                    ray_constants.RESOURCES_ENVIRONMENT_VARIABLE: json.dumps(resources),
                    ray_constants.LABELS_ENVIRONMENT_VARIABLE: json.dumps(labels),
                },
            )
            node = Node(params, head=False, shutdown_at_exit=False, spawn_reaper=False)
            node_tags = {
                TAG_RAY_NODE_KIND: NODE_KIND_WORKER,
                TAG_RAY_USER_NODE_TYPE: node_type,
                TAG_RAY_NODE_NAME: node_id,
                TAG_RAY_NODE_STATUS: STATUS_UP_TO_DATE,
                **tags,
            }
            self._nodes[node_id] = {"tags": node_tags, "node": node}
