"""Reading resources as a dict."""
import mlrun

fn = mlrun.new_function("dict-job", kind="job", image="mlrun/mlrun")
fn.with_limits(mem="2G", cpu=2)
limits = fn.spec.resources["limits"]
print(limits["memory"], limits["cpu"])
