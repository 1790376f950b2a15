"""RuntimeKinds names."""
import mlrun
from mlrun.runtimes import RuntimeKinds

fn = mlrun.new_function("k", kind=RuntimeKinds.job)
assert fn.kind == "job"
