"""Cheat sheet: logging with the context's logger."""
import mlrun

def handler(context):
    context.logger.debug(message="Debugging info")
    context.logger.info(message="Something happened")
    context.logger.warning(message="Something might go wrong")
    context.logger.error(message="Something went wrong")
    context.logger.info("Running handler", rows=3)

run = mlrun.new_function().run(handler=handler, local=True)
assert run.state() == "completed"
