"""MLRun execution context: the example job."""
import mlrun
import pandas as pd

def my_job(context, p1=1, p2="x"):
    print(f"Run: {context.name} (uid={context.uid})")
    print(f"Params: p1={p1}, p2={p2}")
    context.log_result("accuracy", p1 * 2)
    context.log_result("loss", p1 * 3)
    context.set_label("framework", "sklearn")
    context.log_artifact("model", body=b"abc is 123", local_path="model.txt",
                         labels={"framework": "xgboost"})
    context.log_artifact("html_result", body=b"<b> Some HTML <b>", local_path="result.html")
    raw_data = {
        "first_name": ["Jason", "Molly", "Tina", "Jake", "Amy"],
        "last_name": ["Miller", "Jacobson", "Ali", "Milner", "Cooze"],
        "age": [42, 52, 36, 24, 73],
        "testScore": [25, 94, 57, 62, 70],
    }
    df = pd.DataFrame(raw_data, columns=["first_name", "last_name", "age", "testScore"])
    context.log_dataset("mydf", df=df, stats=True)

run = mlrun.new_function().run(handler=my_job, params={"p1": 5}, local=True)
assert run.outputs["accuracy"] == 10
