"""Cheat sheet: manual logging of a result, a model and a dataset."""
import mlrun
import pandas as pd
import pickle

def handler(context):
    df = pd.DataFrame({"a": [1, 2]})
    with open("model.pkl", "wb") as f:
        pickle.dump({"w": 1}, f)
    context.log_result(key="accuracy", value=0.934)
    context.log_model(key="model", model_file="model.pkl")
    context.log_dataset(key="data", df=df, format="csv", index=False)

run = mlrun.new_function().run(handler=handler, local=True)
assert run.outputs["accuracy"] == 0.934
