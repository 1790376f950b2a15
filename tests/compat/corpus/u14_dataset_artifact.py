"""Logging a dataset and reading it back with as_df()."""
import mlrun
import pandas as pd

def handler(context):
    df = pd.DataFrame({"a": [1, 2, 3]})
    context.log_dataset("mydf", df=df, stats=True)

run = mlrun.new_function().run(handler=handler, local=True)
df = run.artifact("mydf").as_df()
assert list(df["a"]) == [1, 2, 3]
