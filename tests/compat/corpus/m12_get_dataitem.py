"""Data items from local files."""
import mlrun

open("data.csv", "w").write("a,b\n1,2\n")
item = mlrun.get_dataitem("data.csv")
df = item.as_df()
assert list(df.columns) == ["a", "b"]
