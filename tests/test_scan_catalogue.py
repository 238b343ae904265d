"""mend scan on the hf: catalogue (torch 2.13.0, transformers 4.52.4): the counts the
GraphMend paper's rows give on this stack (shared/notes/paper-rows.md)."""
import pytest

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.skipif(transformers.__version__ != "4.52.4",
                                reason="break sites and counts are pinned to transformers 4.52.4")


def _sites(doc):
    return {(s["file"], s["line"]): s for s in doc["sites"]}


def test_t5(scan_json):
    code, doc = scan_json("hf:t5")
    assert code == 1
    assert doc["graph_count"] == 4 and doc["graph_break_count"] == 3
    (site,) = doc["sites"]
    assert (site["file"], site["line"], site["count"]) == ("transformers/models/t5/modeling_t5.py", 1019, 3)
    assert site["category"] == "print-logging" and site["fixable_by"] == "deferred-side-effects"


def test_bart_fp16(scan_json):
    _, doc = scan_json("hf:bart@fp16")
    assert doc["graph_break_count"] == 6
    sites = _sites(doc)
    assert set(sites) == {("transformers/models/bart/modeling_bart.py", 567),
                          ("transformers/models/bart/modeling_bart.py", 1246)}
    assert sites[("transformers/models/bart/modeling_bart.py", 567)]["category"] == "data-dependent-branch"


def test_phi3(scan_json):
    _, doc = scan_json("hf:phi3")
    assert doc["graph_break_count"] == 5
    assert {s["file"] for s in doc["sites"]} == {"transformers/modeling_rope_utils.py"}
    assert doc["sites"][0]["fixable_by"] == "predicated-control-flow"


def test_longformer(scan_json):
    _, doc = scan_json("hf:longformer")
    assert doc["graph_break_count"] == 5
    cats = {s["category"]: s for s in doc["sites"]}
    assert set(cats) == {"print-logging", "item-tolist"}
    assert cats["item-tolist"]["fixable_by"] is None and ".item()" in cats["item-tolist"]["source"]


def test_grounding_dino(scan_json):
    _, doc = scan_json("hf:grounding-dino")
    assert doc["graph_break_count"] == 16 and doc["graph_count"] == 17
    cats = {s["category"] for s in doc["sites"]}
    assert {"dynamic-shape-op", "item-tolist", "raise-assert"} <= cats
    assert sum(s["count"] for s in doc["sites"]) == 16
