"""Performance claims, each a ratio against a reference measured in the same run (see each script's docstring)."""
