"""The context outside a run."""
import mlrun

context = mlrun.get_or_create_ctx("train")
p1 = context.get_param("p1", 1)
p2 = context.get_param("p2", "a-string")
context.log_result("accuracy", p1 * 2)
assert context.results["accuracy"] == 2
