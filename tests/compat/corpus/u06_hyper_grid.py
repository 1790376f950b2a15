"""Hyperparameter tuning: grid search."""
def hyper_func(context, p1, p2):
    print(f"p1={p1}, p2={p2}, result={p1 * p2}")
    context.log_result("multiplier", p1 * p2)

import mlrun

grid_params = {"p1": [2, 4, 1], "p2": [10, 20]}
task = mlrun.new_task("grid-demo").with_hyper_params(grid_params, selector="max.multiplier")
run = mlrun.new_function().run(task, handler=hyper_func)
print(run.outputs)
assert run.outputs["best_iteration"] == 4
assert run.outputs["multiplier"] == 80
