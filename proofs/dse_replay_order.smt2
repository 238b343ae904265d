; summary: capturing each effect into a FIFO buffer at its program point and replaying the buffer when the call returns shows exactly the eager sequence of effects, in the same order (inductive step and base case over arbitrary effect sequences).
; rule: deferred-side-effects (print/logging/warnings -> mend.runtime.defer_*)
; expect: unsat
; arithmetic: sequences of uninterpreted effects
; model: eager appends each effect to the output as it runs; deferred code appends it to the buffer
;   (mend::capture, an ORDERED effect, so compiled graphs keep program order) and the scope exit
;   appends the whole buffer to the output. Invariant: eager_out = out ++ buf at every program point.
(set-logic ALL)
(declare-sort Effect 0)
(declare-const out (Seq Effect))
(declare-const buf (Seq Effect))
(declare-const eager_out (Seq Effect))
(declare-const e Effect)
; base case: at the start the buffer is empty and both outputs agree
(declare-const start (Seq Effect))
(define-fun base_ok () Bool (= start (seq.++ start (as seq.empty (Seq Effect)))))
; inductive step: invariant holds, then one more effect runs
(assert (= eager_out (seq.++ out buf)))
(define-fun step_ok () Bool (= (seq.++ eager_out (seq.unit e)) (seq.++ out (seq.++ buf (seq.unit e)))))
; scope exit: replaying the buffer yields the eager output
(define-fun exit_ok () Bool (= (seq.++ out buf) eager_out))
(assert (not (and base_ok step_ok exit_ok)))
(check-sat)
