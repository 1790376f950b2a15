"""Creating the context from the environment in a script's main."""
import mlrun

open("train.py", "w").write(
    "import mlrun\n"
    "if __name__ == '__main__':\n"
    "    context = mlrun.get_or_create_ctx('train')\n"
    "    p1 = context.get_param('p1', 1)\n"
    "    p2 = context.get_param('p2', 'a-string')\n"
    "    context.log_result('accuracy', p1 * 2)\n"
)
fn = mlrun.new_function("train", command="train.py")
run = fn.run(params={"p1": 5}, local=True)
print(run.outputs)
assert run.outputs["accuracy"] == 10
