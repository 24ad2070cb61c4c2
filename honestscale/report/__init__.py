"""The paper-ready scaling report. Not implemented yet: see issue 5."""
