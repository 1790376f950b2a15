"""CPU, GPU, and memory limits: a GPU type other than nvidia.com/gpu."""
import mlrun

fn = mlrun.new_function("gpu-job", kind="job", image="mlrun/mlrun")
fn.gpus(1)
fn.with_limits(gpus=2, gpu_type="amd.com/gpu")
print(fn.spec.resources)
assert fn.spec.resources["limits"]["amd.com/gpu"] == 2
