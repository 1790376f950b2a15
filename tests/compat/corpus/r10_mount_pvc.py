"""Mount persistent storage: PVC."""
import mlrun

fn = mlrun.new_function("pvc-job", kind="job", image="mlrun/mlrun")
fn.apply(mlrun.platforms.mount_pvc(pvc_name="data-claim", volume_name="data",
                                   volume_mount_path="/data"))
print(fn.spec.volumes, fn.spec.volume_mounts)
