"""Orchestration: a campaign spec becomes plans, plans become launched runs (locally or on Slurm).

``spec`` (the TOML spec, its grid and the run plans), ``launch`` (one run's worker processes on this
machine), ``slurm`` (sbatch scripts, squeue tracking, collection). Nothing here prints: the CLI does.
"""
