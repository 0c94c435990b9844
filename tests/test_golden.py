"""Every analysis command in every output format, on the samples and on every shared trace,
prints exactly what tests/golden/ recorded (see tests/golden.py: what is run, how outputs
are kept, how to re-record after a change of behaviour made on purpose)."""
from __future__ import annotations

import json

import pytest

import golden


def _check(corpus: str) -> None:
    want = json.loads((golden.GOLDEN / f"{corpus}.json").read_text())
    got = golden.record(corpus)
    differ = sorted(c for c in set(want) | set(got) if want.get(c) != got.get(c))
    detail = []
    for case in differ[:5]:
        w, g = want.get(case, {}), got.get(case, {})
        detail.append(f"{case}:\n  recorded: {str(w.get('text', w))[:400]!r}\n  now:      {str(g.get('text', g))[:400]!r}")
    assert not differ, (f"{len(differ)} of {len(want)} golden cases differ (python tests/golden.py check "
                        f"--full DIR writes them all):\n" + "\n".join(detail))


def test_samples_outputs_unchanged():
    _check("samples")


@pytest.mark.shared
def test_shared_traces_outputs_unchanged():
    if not golden.SHARED.is_dir():
        pytest.skip("../shared/traces is absent")
    _check("shared")
