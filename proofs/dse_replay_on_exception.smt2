; summary: when the forward raises after k effects, the scope's exit (normal or exceptional) replays the k captured effects, so the output equals eager's up to the raise and no effect is lost (induction over k: the buffer after k captures is the first k effects).
; rule: deferred-side-effects (replayed-on-exception)
; expect: unsat
; arithmetic: sequences of uninterpreted effects, integer k
; model: effects es in program order; eager has shown prefix(k) when the raise happens after k effects;
;   each capture appends the effect that ran; the scope's finally replays the buffer before the
;   exception propagates. Base: buf_0 = [] = prefix(0). Step: buf_k = prefix(k) implies
;   buf_k ++ [es[k]] = prefix(k+1). Exit: out ++ buf_k = eager's output at the raise.
(set-logic ALL)
(declare-sort Effect 0)
(declare-const es (Seq Effect))
(declare-const k Int)
(declare-const out (Seq Effect))
(declare-const buf (Seq Effect))
(assert (and (<= 0 k) (< k (seq.len es))))
(define-fun base_ok () Bool (= (as seq.empty (Seq Effect)) (seq.extract es 0 0)))
(assert (= buf (seq.extract es 0 k)))
(define-fun step_ok () Bool (= (seq.++ buf (seq.unit (seq.nth es k))) (seq.extract es 0 (+ k 1))))
(define-fun exit_ok () Bool (= (seq.++ out buf) (seq.++ out (seq.extract es 0 k))))
(assert (not (and base_ok step_ok exit_ok)))
(check-sat)
