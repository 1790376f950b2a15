"""The HTTP API's routes, one router per resource: runs, functions, schedules, projects,
deployments, the cluster and the service's settings. :mod:`runplane.service.api` assembles
them into the app, with the boundary checks and the one error shape.

Every route reaches the server and its caller through the dependencies of
:mod:`runplane.service.routes.context`; none holds state of its own.
"""
