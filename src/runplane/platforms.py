"""Volume modifiers under the path the documents use: ``runplane.platforms.mount_pvc``."""

from runplane.spec.volumes import VolumeMount, mount_configmap, mount_pvc, mount_secret, mount_v3io

__all__ = ["VolumeMount", "mount_configmap", "mount_pvc", "mount_secret", "mount_v3io"]
