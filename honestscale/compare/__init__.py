"""A against B: is the difference real, and is the comparison fair? (``honestscale compare``)

``compare(view, "campaign-a", "campaign=b,software.nccl=2.21")`` selects the runs of each side (``_select``), pairs
their setups like with like and names the factor under study and the confounds (``_pairs``), gives per pair time
to accuracy (or to train), throughput, energy and, against MLPerf submissions, the MLPerf score: each side's centre
with its 95 % interval, B over A with the interval of the ratio, the two-sided Mann-Whitney test (``_measures``),
and the verdicts of every rule about the runs of both sides and about the pair itself (HS214 confounds, HS112 the
state of the art, HS104 hardware). ``Result.gate`` is the CI gate (``_gate``); ``history`` follows one setup across
campaigns in time (``_history``).
"""

from __future__ import annotations

from honestscale.compare._gate import CANNOT_JUDGE, FAIL, PASS, Check, exit_code, parse_threshold
from honestscale.compare._history import Point, Series, history
from honestscale.compare._history import as_json as history_json
from honestscale.compare._measures import ENERGY, MEASURES, SCORE, THROUGHPUT, TIME, Measure, Side, time_of
from honestscale.compare._pairs import Difference, Pair, Setup, Unpaired
from honestscale.compare._result import SCHEMA, Compared, Result, compare, in_context, select_side
from honestscale.compare._select import Selector, SelectorError
from honestscale.compare._select import parse as parse_selector
from honestscale.compare._text import history_text, result_text

__all__ = [
           "CANNOT_JUDGE",
           "ENERGY",
           "FAIL",
           "MEASURES",
           "PASS",
           "SCHEMA",
           "SCORE",
           "THROUGHPUT",
           "TIME",
           "Check",
           "Compared",
           "Difference",
           "Measure",
           "Pair",
           "Point",
           "Result",
           "Selector",
           "SelectorError",
           "Series",
           "Setup",
           "Side",
           "Unpaired",
           "compare",
           "exit_code",
           "history",
           "history_json",
           "history_text",
           "in_context",
           "parse_selector",
           "parse_threshold",
           "result_text",
           "select_side",
           "time_of",
]  # fmt: skip
