"""The numbers, one copy: intervals of medians and of ratios, the MLPerf score, Amdahl and Gustafson fits.

The linter (superlinear speedups, stalls, time to train against throughput), the report, ``summary`` and
``advise`` all compute their statistics here, so one data set gives one number everywhere.
"""
