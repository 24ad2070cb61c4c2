"""honestscale: results store, honest-metrics linter and scaling reports for distributed DL training.

This module must stay import-light (standard library only): runners import
``honestscale.events`` inside framework environments that do not have the
rest of honestscale's dependencies installed.
"""

__version__ = "0.1.0"
