; summary: a refutation kept on purpose: when an operator of the same graph raises after a plain (post-graph replayed) deferred call, the shown output lacks that call's effect -- why a call that a check follows in its function is emitted ordered, and why a kernel error later in the graph is a stated assumption of the replay.
; rule: deferred-side-effects (replayed-on-exception: the limit of the post-graph replay)
; expect: sat
; arithmetic: sequences of uninterpreted effects
; model: as dse_graph_replay.smt2; the graph raises with pending = [e] (the replayed store after the
;   graph call never runs), so shown stays as it was while eager has shown e.
(set-logic ALL)
(declare-sort Effect 0)
(declare-const shown (Seq Effect))
(declare-const eager (Seq Effect))
(declare-const e Effect)
(assert (= eager (seq.++ shown (seq.unit e))))
(assert (not (= shown eager)))
(check-sat)
