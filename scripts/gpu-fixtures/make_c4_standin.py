"""Build a stand-in for torchtitan's tests/assets/c4_test/data.json (the real file, 2000 C4 docs / ~4.6 MB,
is absent from the stored snapshot). Same shape as C4 json lines: {"text", "timestamp", "url"}.
Text: CPython's own documentation prose (pydoc_data.topics + stdlib module docstrings), PSF-licensed."""

import importlib
import json
import pathlib
import pydoc_data.topics as t
import re
import sys

docs = []
for k in sorted(t.topics):
    for para in re.split(r"\n\s*\n", t.topics[k]):
        p = " ".join(para.split())
        if len(p) > 200:
            docs.append(p)
for m in sorted(sys.stdlib_module_names):
    if m.startswith("_") or m in {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo"}:
        continue
    try:
        mod = importlib.import_module(m)
    except Exception:
        continue
    d = (mod.__doc__ or "").strip()
    if len(d) > 200:
        docs.append(" ".join(d.split()))
    for name, obj in sorted(vars(mod).items()):
        if name.startswith("_") or getattr(obj, "__module__", None) != m:
            continue
        objs = [obj] + (
            [v for kk, v in sorted(vars(obj).items()) if not kk.startswith("_")]
            if isinstance(obj, type)
            else []
        )
        for o in objs:
            od = (getattr(o, "__doc__", None) or "").strip() if callable(o) or isinstance(o, type) else ""
            if len(od) > 120:
                docs.append(" ".join(od.split()))
docs = list(dict.fromkeys(docs))
# merge short paragraphs into c4-sized documents (~2 KB)
out, cur = [], ""
for p in docs:
    cur = (cur + "\n" + p) if cur else p
    if len(cur) > 1800:
        out.append(cur)
        cur = ""
if cur:
    out.append(cur)
with pathlib.Path(sys.argv[1]).open("w") as f:
    for i, txt in enumerate(out):
        f.write(
            json.dumps(
                {
                    "text": txt,
                    "timestamp": "2019-04-25T12:57:54Z",
                    "url": f"https://docs.python.org/3/standin/{i}",
                }
            )
            + "\n"
        )
print(len(out), "docs")
