"""Backends that execute rendered work: ``local`` (processes here) and, later, ``kubernetes``.

Every runtime has one interface: submit a rendered run, report what happens to it as
:class:`~runplane.runtimes.events.RunEvent` values, and abort it.
"""
