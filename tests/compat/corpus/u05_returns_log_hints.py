"""Track returning values using hints and returns (cheat sheet)."""
import mlrun
import pandas as pd

open("data.csv", "w").write("a,b\n1,2\n3,4\n")
open("handlers.py", "w").write(
    "def my_handler(df):\n"
    "    processed_df = df.assign(c=df['a'] + df['b'])\n"
    "    return processed_df, int(df['a'].sum())\n"
)
my_func = mlrun.code_to_function("handlers", filename="handlers.py", kind="job")
log_with_returns_run = my_func.run(
    handler="my_handler",
    inputs={"df: pandas.DataFrame": "data.csv"},
    returns=["processed_data", "sum"],
    local=True,
)
print(log_with_returns_run.outputs)
assert log_with_returns_run.outputs["sum"] == 4
