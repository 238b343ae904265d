; summary: snapshots appended per graph and performed right after the graph call, with an ordered call first performing what its graph deferred so far, keep the invariant eager = shown ++ pending at every step, so at every graph boundary and at every ordered check (pending empty) the shown output equals eager's: program order, and nothing lost or added when the forward raises there.
; rule: deferred-side-effects (order-preserved, replayed-on-exception: the post-graph replay of mend.runtime)
; expect: unsat
; arithmetic: sequences of uninterpreted effects
; model: eager shows each effect when it runs. Mended, compiled: a deferred call appends its effect
;   to the graph's pending tuple (no output); the store Dynamo replays right after the graph call
;   shows the whole tuple and empties it; an ordered call (mend::capture) shows the pending tuple
;   and then its own effect at its position, and empties it; code outside a graph (an eager
;   effect, a raise from Python) runs only at a graph boundary, after the replay (pending empty);
;   a check that can fail inside the graph follows an ordered call with no plain deferred call
;   between (the rule emits `ordered=True` for every call a check follows in its function), so
;   pending is empty there too. Each step preserves eager = shown ++ pending; where pending is
;   empty, shown = eager. (The limit -- a plain deferred call before an operator of the same graph
;   that raises -- is the case with pending non-empty at the raise: shown lacks it.)
(set-logic ALL)
(declare-sort Effect 0)
(declare-const shown (Seq Effect))
(declare-const pending (Seq Effect))
(declare-const eager (Seq Effect))
(declare-const e Effect)
(assert (= eager (seq.++ shown pending)))
; a plain deferred call
(define-fun defer_ok () Bool (= (seq.++ eager (seq.unit e)) (seq.++ shown (seq.++ pending (seq.unit e)))))
; an ordered call: pending, then e, shown at its position
(define-fun ordered_ok () Bool (= (seq.++ eager (seq.unit e))
                                  (seq.++ (seq.++ shown (seq.++ pending (seq.unit e))) (as seq.empty (Seq Effect)))))
; the replayed store after the graph call
(define-fun replay_ok () Bool (= eager (seq.++ (seq.++ shown pending) (as seq.empty (Seq Effect)))))
; after the replay (pending empty) an eager effect runs, or an exception propagates: shown = eager
(define-fun boundary_ok () Bool (= (seq.++ (seq.++ shown pending) (seq.unit e)) (seq.++ eager (seq.unit e))))
(define-fun check_ok () Bool (=> (= pending (as seq.empty (Seq Effect))) (= shown eager)))
(assert (not (and defer_ok ordered_ok replay_ok boundary_ok check_ok)))
(check-sat)
