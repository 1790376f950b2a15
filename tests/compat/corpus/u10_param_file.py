"""Hyperparameters from a CSV file."""
def hyper_func(context, p1, p2):
    print(f"p1={p1}, p2={p2}, result={p1 * p2}")
    context.log_result("multiplier", p1 * p2)

import mlrun

open("params.csv", "w").write("p1,p2\n1,10\n5,3\n2,2\n")
task = mlrun.new_task("file-demo").with_param_file("params.csv", selector="min.multiplier")
run = mlrun.new_function().run(task, handler=hyper_func, local=True)
assert run.outputs["multiplier"] == 4
