"""One module per rule, named after the bad practice it catches (the registry finds them all)."""
