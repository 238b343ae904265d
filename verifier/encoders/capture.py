"""Encoders for deferred side effects (``print``/logging/``warnings.warn`` snapshotted in the
graph and replayed right after the graph call, or, ``ordered``, kept in place by the ordered
custom op ``mend::capture``): all checks.

What they rest on is site-independent -- replay order, replay on exception, snapshot
before mutation, lazy formatting, once per process -- and proved once, as lemmas under
``proofs/`` (cited, never re-solved per site). What is per site is whether the runtime
facts those lemmas assume hold in this process: the op is registered ORDERED and writes
nothing (torch's registry), its body clones each tensor, the scope replays in ``finally``,
the replay goes through the same method and warning call (the runtime's source, found
by module name; :mod:`verifier.effects`).
"""
from __future__ import annotations

from verifier.effects import capture_clones, capture_is_ordered, runtime_screen
from verifier.encoders.base import Ctx
from verifier.outcomes import Outcome, check_refuted, checked, unknown
from verifier.replay_raisers import site_key

LAZY = "mend.lazy"   # the runtime's lazy values (fmt, item), by name only


def _runtime_check(kind: str, ok: bool, text: str, by: str, assumptions: list[str], lemma: str | None) -> Outcome:
    if not ok:
        return unknown(f"{kind} rests on a runtime fact that does not hold here: {text}")
    return checked(f"{by} ({text})", assumptions, [lemma] if lemma else [])


def _replays(ob: dict) -> bool:
    """Whether the site uses the post-graph replay (the default), not the ordered operator."""
    return ob.get("mechanism", "replay") == "replay"


def order_preserved(ob: dict, ctx: Ctx) -> Outcome:
    if _replays(ob):
        ok, text = runtime_screen([("_record", "_self._replay = _self._replay + ("),
                                   ("_ReplayingModule", "@torch.compiler.disable"),
                                   ("_ReplayingModule", "for key, ts, ns in value")])
        return _runtime_check("order-preserved", ok, text,
                              "the source screen of the runtime: each call appends to one tuple, performed in "
                              "order by the module's disabled __setattr__ that Dynamo replays after the graph",
                              [text, "Dynamo replays a store to a module attribute as STORE_ATTR after the graph call "
                                     "and does not run __setattr__ while tracing (torch 2.13, "
                                     "tests/test_runtime_replay.py)"],
                              "proofs/dse_graph_replay.smt2")
    ok, text = capture_is_ordered()
    return _runtime_check("order-preserved", ok, text, "the runtime facts read from torch's operator registry",
                          [text, "effects outside the deferred calls are not interleaved within the scope"],
                          "proofs/dse_replay_order.smt2")


RAISER_AFTER = "can raise at run time after the deferred call, in the graph that replays it"
RAISER_BEFORE = "can raise at run time before the ordered call's capture, in the graph that holds it"


def _raisers(ob: dict, ctx: Ctx) -> tuple[list[str] | None, str]:
    """(the operators that can raise after the call, None when not observed; what was observed)
    from the facts' trace of the deferred calls' graphs (verifier/replay_raisers.py)."""
    replay = ctx.facts.get("replay")
    if not isinstance(replay, dict) or not ob.get("function"):
        return None, "not observed (no trace of the graphs in the facts)"
    if not _replays(ob):   # the ordered form: a raiser before its capture (no key: no graph holds it)
        if not replay.get("ordered_graphs"):
            return None, ("not observed: the traced run failed (" + replay["error"] + ")" if replay.get("error")
                          else "not observed: no compiled graph holds the call's capture")
    elif not replay.get("replay_graphs") and replay.get("error"):
        return None, f"not observed: the traced run failed ({replay['error']})"
    elif not replay.get("replay_graphs"):   # no graph defers it: the call runs as written, nothing to lose
        return [], (f"observed: none of the {replay.get('graphs', 0)} compiled graph(s) replays a deferred call, so "
                    "the call runs in place")
    found = (replay.get("raisers") or {}).get(site_key(ob))
    graphs = (f"{replay.get('ordered_graphs', 0)} graph(s) holding an ordered capture" if not _replays(ob) else
              f"{replay['replay_graphs']} graph(s) replaying a deferred call")
    return (None, "not observed for this function") if found is None else (found, (
        f"observed in Dynamo's traces of the example run (eval without grad, training with grad; {graphs}, "
        "verifier/replay_raisers.py)"))


def replayed_on_exception(ob: dict, ctx: Ctx) -> Outcome:
    if _replays(ob):
        ok, text = runtime_screen([("_ReplayingModule", "_perform(key"), ("_exit", "flush()")])
        raisers, seen = _raisers(ob, ctx)
        if ok and raisers:
            return check_refuted("Dynamo's trace of the graph that replays the call (verifier/replay_raisers.py)",
                                 f"{', '.join(raisers[:4])} {RAISER_AFTER}: when it raises, the graph never "
                                 "returns, so the replay never happens and the output eager showed before the "
                                 "error is lost; the ordered form (mend::capture) performs the call in place")
        assumes = ob.get("assumes", "no operator later in the same graph raises at run time")
        # the risk in plain words first: fix_safety quotes this in an unsafe fix's reason (helper-67)
        return _runtime_check("replayed-on-exception", ok, text,
                              "the call's output would be lost if an operator after it in the same graph raised "
                              "(the replay happens only when the graph returns), or if Dynamo's trace of that graph "
                              "failed (an input whose shape makes a later operator raise while it traces: the "
                              "original's graph break had shown the output first; helper-102); "
                              + ("no operator that can raise on tensor values follows it in the traced graphs, "
                                 + seen + "; " if raisers is not None else "")
                              + "the source screen of the runtime: the store after the graph call performs the "
                              "entries before any later Python of the frame runs (and a scope replays in `finally`)",
                              [assumes if raisers is None else
                               f"{assumes}: {seen}; operators are screened by name (verifier/replay_raisers.py), and "
                               "inputs compiled to other guards give other graphs, not traced",
                               f"the graphs' operators were {seen}" if raisers is None else
                               "code compiled into the same graph by a caller outside the traced model is not seen"],
                              "proofs/dse_graph_replay.smt2")
    # the ordered form: exact under the eager and aot_eager backends, not under inductor
    before, seen = _raisers(ob, ctx)
    return unknown((f"{', '.join(before[:4])} {RAISER_BEFORE} ({seen}); " if before else "")
                   + "mend::capture is an ordered effect, exact under the eager and aot_eager backends, but "
                   "inductor keeps it in order neither with a check nor with a kernel that raises: it fused a "
                   "following check with a buffer update into a kernel that ran before the capture, dropping a "
                   "print eager showed (helper-65), and ran a capture before an earlier gather's index error "
                   "surfaced, printing one eager never showed (helper-62); on a failing call the output shown "
                   "may differ from eager's under inductor, and none is shown when Dynamo's trace of the graph "
                   "fails (an input whose shape makes a later operator raise while it traces)")


def snapshot(ob: dict, ctx: Ctx) -> Outcome:
    if _replays(ob):
        ok, text = runtime_screen([("_record", "t.detach().clone() for t in tensors")])
    else:
        ok, text = capture_clones()
    names = ob.get("values") or []
    return _runtime_check("snapshot-before-mutation", ok, text, "the source screen of the runtime's snapshot",
                          [text, "shown values: " + (", ".join(f"`{n}`" for n in names) or "none")],
                          "proofs/dse_snapshot.smt2")


def lazy_format(ob: dict, ctx: Ctx) -> Outcome:
    ok, text = runtime_screen([("Fmt", ".format("), ("Fmt", "_check_specs("), ("_check_specs", "object.__format__(value, spec)"),
                               ("_check_specs", "_spec_error(kind, spec)")], module=LAZY)
    return _runtime_check("lazy-format-equals-fstring", ok, text,
                          "the source screen of the runtime: the lazy format renders with str.format",
                          ["the lazy format renders the snapshot with the f-string's own format spec (mend.runtime.fmt)",
                           "formats: " + ", ".join(ob.get("formats", []))], "proofs/dse_lazy_format.smt2")


def lazy_item(ob: dict, ctx: Ctx) -> Outcome:
    ok1, text1 = runtime_screen([("Item", "tensor.numel() != 1"), ("Item", "self.tensor.item()"),
                                 ("item", "return x.item()"), ("item", "x.detach().clone()"),
                                 ("item", "isinstance(x, torch.Tensor)")], module=LAZY)
    ok2, text2 = runtime_screen([("_rebuild", "return t.item() if cast is None else cast(t)")])
    ok, text = ok1 and ok2, f"{text1}; {text2}"
    return _runtime_check("lazy-item-equals-item", ok, text,
                          "the source screen of the runtime: item(t) raises where t.item() raised (not one element) "
                          "and is read as .item() of the snapshot, eagerly and at replay",
                          ["the snapshot is t.detach().clone(): same dtype and bits, so .item() gives the same number "
                           "(snapshot-before-mutation)", "values: " + ", ".join(f"`{v}`" for v in ob.get("values", []))],
                          "proofs/dse_snapshot.smt2")


def once_per_process(ob: dict, ctx: Ctx) -> Outcome:
    ok, text = runtime_screen([("_log", "getattr(logger, method)"), ("_perform", "_perform_site(site, tensors, ints)"), ("_perform_site", "getattr(site.target, site.method)")])
    return _runtime_check("once-per-process", ok, text,
                          "the source screen of the runtime: eager call and replay both call the logger's own method",
                          [f"the replay calls `{ob.get('method', 'warning_once')}` itself (its lru_cache holds `seen`)"],
                          "proofs/dse_once_per_process.smt2")


def warning_identity(ob: dict, ctx: Ctx) -> Outcome:
    ok, text = runtime_screen([("_warn", "warnings.warn("), ("_warn", "if _warn_raises("),
                               ("_warn", "_warn_here(message"), ("_warn_here", "_warn_at("),
                               ("_perform", "_perform_site(site, tensors, ints)"), ("_perform_site", "_warn_at(message, category"),
                               ("_warn_at", "(message, category")])
    return _runtime_check("warning-identity", ok, text,
                          "the source screen of the runtime: the replay warns with the captured message and category",
                          ["filename and line: the traced line of the mended source, "
                           + ("moved by one: the import needed a line of its own" if ob.get("may_differ") else
                              "the original's unless another rewrite above the call changed the line count (the "
                              "import shares an existing line)"),
                           "a warnings filter that may turn the warning into an error while Dynamo traces keeps the "
                           "call in place (not deferred); the filters' actions are guards of the trace, so one changed to "
                           "'error' after compiling makes Dynamo trace again and keep the call in place"], None)


ENCODERS = {
    "order-preserved": order_preserved,
    "replayed-on-exception": replayed_on_exception,
    "snapshot-before-mutation": snapshot,
    "lazy-format-equals-fstring": lazy_format,
    "lazy-item-equals-item": lazy_item,
    "once-per-process": once_per_process,
    "warning-identity": warning_identity,
}
CHECKS = frozenset(ENCODERS)
# The replayed form's "no operator later in the same graph raises at run time" is seen in one
# trace of the example (verifier/replay_raisers.py): other inputs, guards and modes give other
# graphs (helper-65's nine counterexamples), so it is an observation and the fix unsafe.
OBSERVED = frozenset({"replayed-on-exception"})
