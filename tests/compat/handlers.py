"""Handlers written as MLRun's documentation writes them, passed to runs as Python functions
(``fn.run(handler=hyper_func)``): runplane sends this module's definitions to the run."""

import runplane as mlrun


def hyper_func(context, p1, p2):
    print(f"p1={p1}, p2={p2}, result={p1 * p2}")
    context.log_result("multiplier", p1 * p2)


def custom_iterator(context: mlrun.MLClientCtx, param_list):
    best_multiplier = total = 0
    for param in param_list:
        with context.get_child_context(**param) as child:
            hyper_func(child, **child.parameters)
            multiplier = child.results["multiplier"]
            total += multiplier
            if multiplier > best_multiplier:
                child.mark_as_best()
                best_multiplier = multiplier
    context.log_result("avg_multiplier", total / len(param_list))


def my_job(context, p1=1, p2="x"):
    print(f"Run: {context.name} (uid={context.uid})")
    print(f"Params: p1={p1}, p2={p2}")
    context.log_result("accuracy", p1 * 2)
    context.log_result("loss", p1 * 3)
    context.set_label("framework", "sklearn")
    context.log_artifact(
        "model", body=b"abc is 123", local_path="model.txt", labels={"framework": "xgboost"}
    )
    context.log_artifact("html_result", body=b"<b> Some HTML <b>", local_path="result.html")
    import pandas as pd

    raw_data = {
        "first_name": ["Jason", "Molly", "Tina", "Jake", "Amy"],
        "age": [42, 52, 36, 24, 73],
    }
    df = pd.DataFrame(raw_data, columns=["first_name", "age"])
    context.log_dataset("mydf", df=df, stats=True)


def reads_params(context):
    p1 = context.get_param("p1", 1)
    p2 = context.get_param("p2", "a-string")
    context.logger.info("read the parameters", p1=p1, p2=p2)
    context.logger.debug(message="not shown at the default level")
    context.log_results({"p1": p1, "p2": p2})


def processes(df):
    return df.assign(total=df["a"] + df["b"]), int(df["a"].sum())


def reads_input(context, data: mlrun.DataItem):
    df = data.as_df()
    context.log_result("rows", len(df))
    context.log_result("local", data.local())


def reads_frame(df: "pandas.DataFrame"):  # noqa: F821 - read as a string annotation
    return len(df)


def fails(context):
    raise ValueError("bad data in row 7")


def secret_reader(context):
    return {
        "secret": context.get_secret("AWS_KEY"),
        "param": context.get_project_param("label_column", "none"),
    }


def model_logger(context):
    with open("model.pkl", "wb") as model:
        model.write(b"weights")
    context.log_model(
        "model",
        model_file="model.pkl",
        framework="sklearn",
        metrics={"accuracy": 0.9},
        labels={"team": "a"},
    )
    context.log_result("subpath", context.artifact_subpath("plots", "roc.png"))


def needs_monitoring(context):
    context.log_model("model", body=b"w", model_file="m.pkl", training_set=[[1, 2]])


def fails_first_attempt(context):
    """Fails on its first attempt only: what MLRun's ``retry=`` is for."""
    import os

    attempt = int(os.environ["RUNPLANE_ATTEMPT"])
    if attempt == 1:
        raise RuntimeError("a flaky first attempt")
    context.log_result("attempt", attempt)
