"""Persistent volumes on the testbed's real node, as a small cluster without a storage system
has them: a ``local`` PersistentVolume per directory of the node's disk, made ahead by whoever
runs the cluster, under a StorageClass with no provisioner that binds a claim when its pod is
scheduled (``WaitForFirstConsumer``), so the pod goes where its volume is.

The chart's PostgreSQL claims one (``postgresql.storage.storageClassName``); a cluster with a
provisioner (a cloud's disks, local-path, Longhorn) makes them itself and needs none of this.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed import topology as tb_topology
from testbed.realnode import RealNode

STORAGE_CLASS = "local-storage"


def storage_class(api: client.ApiClient) -> str:
    """The StorageClass of the node's local volumes, made if missing; returns its name."""
    body = client.V1StorageClass(
        metadata=client.V1ObjectMeta(name=STORAGE_CLASS),
        provisioner="kubernetes.io/no-provisioner",
        volume_binding_mode="WaitForFirstConsumer",
        reclaim_policy="Retain",
    )
    try:
        client.StorageV1Api(api).create_storage_class(body)
    except ApiException as error:
        if error.status != 409:
            raise
    return STORAGE_CLASS


def directory(node: RealNode, name: str) -> Path:
    return node.work / "volumes" / name


def local_volume(
    api: client.ApiClient, node: RealNode, name: str, size: str = "1Gi", uid: int = 0
) -> str:
    """A ``local`` PersistentVolume of ``size`` on a new, empty directory of the node, owned
    by ``uid`` (the pod's user: the kubelet does not change a local volume's owner unless the
    pod asks with ``fsGroup``); returns the volume's name."""
    path = directory(node, name)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, mode=0o700)
    os.chown(path, uid, uid)
    selector = client.V1NodeSelectorRequirement(
        key=tb_topology.HOSTNAME_LABEL, operator="In", values=[node.name]
    )
    body = client.V1PersistentVolume(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PersistentVolumeSpec(
            capacity={"storage": size},
            access_modes=["ReadWriteOnce"],
            persistent_volume_reclaim_policy="Retain",
            storage_class_name=storage_class(api),
            local=client.V1LocalVolumeSource(path=str(path)),
            node_affinity=client.V1VolumeNodeAffinity(
                required=client.V1NodeSelector(
                    node_selector_terms=[client.V1NodeSelectorTerm(match_expressions=[selector])]
                )
            ),
        ),
    )
    client.CoreV1Api(api).create_persistent_volume(body)
    return name


def delete_local_volume(api: client.ApiClient, node: RealNode, name: str) -> None:
    """The volume and its directory's data."""
    with contextlib.suppress(ApiException):
        client.CoreV1Api(api).delete_persistent_volume(name)
    shutil.rmtree(directory(node, name), ignore_errors=True)
