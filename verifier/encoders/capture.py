"""Encoders for deferred side effects (``print``/logging/``warnings.warn`` captured by the
ordered custom op ``mend::capture`` and replayed after the compiled call): all checks.

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
from verifier.outcomes import Outcome, checked, unknown


def _runtime_check(kind: str, ok: bool, text: str, by: str, assumptions: list[str], lemma: str | None) -> Outcome:
    if not ok:
        return unknown(f"{kind} rests on a runtime fact that does not hold here: {text}")
    return checked(f"{by} ({text})", assumptions, [lemma] if lemma else [])


def order_preserved(ob: dict, ctx: Ctx) -> Outcome:
    ok, text = capture_is_ordered()
    return _runtime_check("order-preserved", ok, text, "the runtime facts read from torch's operator registry",
                          [text, "effects outside the deferred calls are not interleaved within the scope"],
                          "proofs/dse_replay_order.smt2")


def replayed_on_exception(ob: dict, ctx: Ctx) -> Outcome:
    ok, text = runtime_screen([("capture", "finally"), ("_scoped_forward", "finally"), ("_exit", "flush()")])
    return _runtime_check("replayed-on-exception", ok, text,
                          "the source screen of the runtime: the capture scope replays in its `finally`",
                          [f"the scope that replays is active: {ob.get('requires', 'mend.runtime.install(model)')}",
                           "the replay runs in the scope's finally (mend.runtime.capture / install)"],
                          "proofs/dse_replay_on_exception.smt2")


def snapshot(ob: dict, ctx: Ctx) -> Outcome:
    ok, text = capture_clones()
    names = ob.get("values") or []
    return _runtime_check("snapshot-before-mutation", ok, text, "the source screen of the runtime's mend::capture",
                          [text, "shown values: " + (", ".join(f"`{n}`" for n in names) or "none")],
                          "proofs/dse_snapshot.smt2")


def lazy_format(ob: dict, ctx: Ctx) -> Outcome:
    ok, text = runtime_screen([("Fmt", ".format(")])
    return _runtime_check("lazy-format-equals-fstring", ok, text,
                          "the source screen of the runtime: the lazy format renders with str.format",
                          ["the lazy format renders the snapshot with the f-string's own format spec (mend.runtime.fmt)",
                           "formats: " + ", ".join(ob.get("formats", []))], "proofs/dse_lazy_format.smt2")


def once_per_process(ob: dict, ctx: Ctx) -> Outcome:
    ok, text = runtime_screen([("defer_log", "getattr(logger, method)"), ("_perform", "getattr(site.target, site.method)")])
    return _runtime_check("once-per-process", ok, text,
                          "the source screen of the runtime: eager call and replay both call the logger's own method",
                          [f"the replay calls `{ob.get('method', 'warning_once')}` itself (its lru_cache holds `seen`)"],
                          "proofs/dse_once_per_process.smt2")


def warning_identity(ob: dict, ctx: Ctx) -> Outcome:
    ok, text = runtime_screen([("defer_warn", "warnings.warn("), ("_perform", "_warn_at(message, category"),
                               ("_warn_at", "(message, category")])
    return _runtime_check("warning-identity", ok, text,
                          "the source screen of the runtime: the replay warns with the captured message and category",
                          ["filename and line may differ (those of the mended source; documented)"], None)


ENCODERS = {
    "order-preserved": order_preserved,
    "replayed-on-exception": replayed_on_exception,
    "snapshot-before-mutation": snapshot,
    "lazy-format-equals-fstring": lazy_format,
    "once-per-process": once_per_process,
    "warning-identity": warning_identity,
}
CHECKS = frozenset(ENCODERS)
