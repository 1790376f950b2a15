"""The pages, one module per area of the menu; each gives a router over the shared :class:`UI`."""
