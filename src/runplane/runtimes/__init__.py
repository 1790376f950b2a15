"""Backends that execute rendered work: ``local`` (processes here) and ``kubernetes`` (pods).

Every runtime implements one contract (:mod:`runplane.runtimes.contract`): launch a
:class:`RunRequest` built by :func:`runplane.runtimes.request.build_request`, report what happens
as :class:`~runplane.runtimes.events.RunEvent` values, abort, serve logs and usage. Kept free of
imports: a run's own process starts from modules in this package.
"""
