"""Hyperparameters and a selector given to run()."""
def hyper_func(context, p1, p2):
    print(f"p1={p1}, p2={p2}, result={p1 * p2}")
    context.log_result("multiplier", p1 * p2)

import mlrun

fn = mlrun.new_function()
run = fn.run(handler=hyper_func, hyperparams={"p1": [1, 2], "p2": [3]}, selector="max.multiplier",
             local=True)
assert run.outputs["multiplier"] == 6
