"""The honest-metrics linter (rules HS101-HS112, HS2xx). Not implemented yet: see issue 4."""
