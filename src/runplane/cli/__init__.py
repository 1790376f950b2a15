"""The ``runplane`` command line: thin, every decision is made in the layers below."""
