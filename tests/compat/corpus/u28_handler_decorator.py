"""Cheat sheet: the MLRun handler decorator."""
import mlrun
import pandas as pd

@mlrun.handler(labels={"framework": "none"}, outputs=["total"])
def add(a: int, b: int):
    return a + b

run = mlrun.new_function().run(handler=add, params={"a": 1, "b": 2}, local=True)
assert run.outputs["total"] == 3
