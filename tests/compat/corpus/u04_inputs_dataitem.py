"""Inputs arrive as DataItems (as_df)."""
import mlrun

open("data.csv", "w").write("a,b\n1,2\n3,4\n")
open("prep.py", "w").write(
    "import mlrun\n"
    "def prep(context, data: mlrun.DataItem):\n"
    "    df = data.as_df()\n"
    "    context.log_result('rows', len(df))\n"
)
fn = mlrun.code_to_function("prep", filename="prep.py", kind="job", handler="prep")
run = fn.run(inputs={"data": "data.csv"}, local=True)
assert run.outputs["rows"] == 2
