"""honestscale.collector."""
