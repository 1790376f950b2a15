"""Managing job resources: an mpijob with replicas, CPU request and a GPU."""
import mlrun

open("training.py", "w").write("def train(context):\n    pass\n")
training_function = mlrun.code_to_function("training.py", name="training", handler="train",
                                           kind="mpijob", image="mlrun/ml-models-gpu")
training_function.spec.replicas = 2
training_function.with_requests(cpu=2)
training_function.gpus(1)
