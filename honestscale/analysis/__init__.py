"""The numbers, one copy: intervals of medians and of ratios, scaling, the laws, energy, comparisons, ranks and the
MLPerf score, computed over the one view (``honestscale.view``); nothing here presents or judges.

The linter (superlinear speedups, stalls, time to train against throughput), the report, ``summary`` and
``advise`` all compute their statistics here, so one data set gives one number everywhere.
"""
