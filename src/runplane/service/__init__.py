"""The only layer with persistent state: run records, and what keeps them honest."""
