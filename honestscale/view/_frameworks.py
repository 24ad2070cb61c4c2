"""Which framework a run's framework names, apart from its version: ``tf2.0`` and ``tf2.1`` (one system's two MLPerf
submissions), ``TensorFlow 2.8.0`` and ``TensorFlow 2.15``, ``NGC PyTorch 20.06`` and ``NGC PyTorch 24.04`` are
versions of one framework, never two frameworks side by side.

MLPerf system descriptions spell the framework and its version in one field; honestscale's runners record them
apart (``framework`` and ``framework_version``). The family is the name without its version numbers (a word that is
a version: ``2.0``, ``v1.13``, ``20.06``, ``2.4.0+cu121``), lower case, with the usual short names spelt out
(``tf``: tensorflow, ``pt``: pytorch), so that like is compared with like.
"""

from __future__ import annotations

import re

# a word that is a version ("2.0", "v1.13", "20.06", "2.4.0+cu121", "21.09-py3", "1.13rc1"), and a version glued
# to a name with at least one dot ("tf2.0", "pytorch1.13"; not "x86" or "tf2", which are names)
_WORD = re.compile(r"v?\d+(?:[._\-]\d+)*(?:[a-z]+\d*)?(?:[+\-][\w.]+)?", re.IGNORECASE)
_GLUED = re.compile(r"(?P<name>.*[a-z])(?P<version>\d+(?:\.\d+)+(?:[a-z]+\d*)?(?:\+[\w.]+)?)", re.IGNORECASE)
_ALIASES = {"tf": "tensorflow", "pt": "pytorch"}


def _split(name: str) -> tuple[list[str], list[str]]:
    """The words of a name that name the framework, and those that are its version."""
    names, versions = [], []
    for word in name.split():
        glued = _GLUED.fullmatch(word)
        if _WORD.fullmatch(word):
            versions.append(word)
        elif glued:
            names.append(glued["name"])
            versions.append(glued["version"])
        else:
            names.append(word)
    return names, versions


def framework_family(name: str | None) -> str:
    """The framework a name names, without its version (``tf2.1`` -> ``tensorflow``, ``NGC MXNet 20.06`` ->
    ``ngc mxnet``); the name itself, lower case, where it has no version; ``?`` for none."""
    if not name:
        return "?"
    parts = []
    for part in re.split(r"\s*,\s*", name.strip()):
        words = [w.lower().strip("-_.") for w in _split(part)[0]]
        parts.append(" ".join(_ALIASES.get(w, w) for w in words if w) or part.lower())
    return ", ".join(parts)


def framework_version(name: str | None) -> str | None:
    """The version a framework name carries (``tf2.1`` -> ``2.1``; ``NGC MXNet 20.06 , NGC PyTorch 20.06`` ->
    ``20.06``), None where it carries none."""
    found = sorted({v for part in re.split(r"\s*,\s*", name or "") for v in _split(part)[1]})
    return ", ".join(found) or None


__all__ = ["framework_family", "framework_version"]
