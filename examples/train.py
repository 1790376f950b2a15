"""The example job: a tiny training loop whose handler takes typed parameters."""


def train(context, epochs: int = 3, learning_rate: float = 0.1) -> dict[str, float]:
    loss = 1.0
    for epoch in range(epochs):
        loss *= 1 - learning_rate
        context.logger.info(f"epoch {epoch}: loss {loss:.4f}")
    return {"loss": loss, "epochs": float(epochs)}
