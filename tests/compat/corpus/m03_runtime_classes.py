"""Runtime classes by kind."""
import mlrun

fn = mlrun.new_function("job", kind="job", image="mlrun/mlrun")
assert isinstance(fn, mlrun.runtimes.KubejobRuntime)
serving = mlrun.new_function("serve", kind="serving", image="mlrun/mlrun")
assert isinstance(serving, mlrun.runtimes.ServingRuntime)
