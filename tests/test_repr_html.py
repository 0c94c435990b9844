"""A Result in a notebook (issue 48): `_repr_html_` shows the headline, the main table and
the further tables, with every string from the trace escaped."""
from __future__ import annotations

import json

from kineto_synth import Trace

from traceq import api


def test_result_renders_as_html_with_escaped_names(tmp_path):
    t = Trace()
    t.step(1, 0, 1000)
    t.launch("<img src=x onerror=alert(1)>_kernel", 0, 10, 20, 500)
    store = api.open_store(tmp_path / "s")
    store.ingest([t.write(tmp_path / "t.json.gz")])
    r = store.result("hotspots")
    html = r._repr_html_()
    assert "<img" not in html and "&lt;img src=x" in html
    assert "<b>hotspots</b>" in html and "<table" in html
    head = r.headline.splitlines()[-1]
    import html as h
    assert h.escape(head) in html
    # the same rows as JSON's
    assert len(json.loads(json.dumps(r.to_dict()))["rows"]) == r.rows_df().height
    st = store.result("stalls")
    assert "<b>causes</b>" in st._repr_html_()
