"""Volumes: ConfigMap and Secret mounts."""
import mlrun
from mlrun.platforms import mount_configmap, mount_secret

fn = mlrun.new_function("cfg-job", kind="job", image="mlrun/mlrun")
fn.apply(mount_configmap("my-config", "/etc/config"))
fn.apply(mount_secret("my-secret", "/etc/secret"))
assert len(fn.spec.volumes) == 2
