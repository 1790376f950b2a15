"""HyperParamOptions object."""
def hyper_func(context, p1, p2):
    print(f"p1={p1}, p2={p2}, result={p1 * p2}")
    context.log_result("multiplier", p1 * p2)

import mlrun
from mlrun.model import HyperParamOptions

run = mlrun.new_function().run(
    handler=hyper_func,
    hyperparams={"p1": [1, 2, 3], "p2": [2]},
    hyper_param_options=HyperParamOptions(selector="min.multiplier", strategy="grid"),
    local=True,
)
assert run.outputs["multiplier"] == 2
