"""Volumes: V3IO with explicit volume mounts."""
import mlrun

fn = mlrun.new_function("v3io-job", kind="job", image="mlrun/mlrun")
fn.apply(mlrun.mount_v3io(name="data", access_key="XYZ123",
                          volume_mounts=[mlrun.VolumeMount("/data", "projects/proj1/data")]))
print(len(fn.spec.volumes))
