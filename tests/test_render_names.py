"""Narrow tables keep different names different (render.shorten_distinct)."""
from traceq.render import shorten, shorten_distinct

# two real fbgemm labels (trace_diff/control) that a plain middle cut to 25 makes identical
CTA = "split_embedding_b…el_cta_per_r…[split_embedding_backward] #1"
WARP = "split_embedding_b…l_warp_per_r…[split_embedding_backward] #1"


def test_plain_middle_cut_would_merge_them():
    assert shorten(CTA, 25) == shorten(WARP, 25) == "split_embedd…backward] #1"


def test_distinct_values_stay_distinct_and_fit():
    out = shorten_distinct([CTA, WARP, "short", None], 25)
    assert out[0] != out[1]
    assert all(len(s) <= 25 for s in out[:2])
    assert out[0].startswith("split_em") and "cta" in out[0]
    assert "warp" in out[1]
    assert out[2:] == ["short", None]


def test_values_without_a_clash_keep_the_middle_cut():
    names = ["a" * 40 + "_one", "b" * 40 + "_two"]
    assert shorten_distinct(names, 20) == [shorten(n, 20) for n in names]


def test_difference_near_the_end_is_kept():
    a, b = "prefix_common_text_" + "x" * 30 + "A", "prefix_common_text_" + "x" * 30 + "B"
    out = shorten_distinct([a, a, b], 20)
    assert out[0] == out[1] and out[0] != out[2] and out[2].endswith("B")
