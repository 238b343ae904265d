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
; es = pre ++ [e] ++ post with len(pre) = k: every es and 0 <= k < len(es) has this form, so the
; decomposition loses no generality; stated this way z3 decides it in ~1e3 rlimit steps instead
; of ~2.6e6 (the extract-only form once came back unknown within 30 s on a 2-core CI machine)
(declare-const pre (Seq Effect))
(declare-const e Effect)
(declare-const post (Seq Effect))
(declare-const k Int)
(declare-const out (Seq Effect))
(declare-const buf (Seq Effect))
(define-fun es () (Seq Effect) (seq.++ pre (seq.unit e) post))
(assert (= k (seq.len pre)))
(define-fun base_ok () Bool (= (as seq.empty (Seq Effect)) (seq.extract es 0 0)))
(assert (= buf (seq.extract es 0 k)))
(define-fun step_ok () Bool (= (seq.++ buf (seq.unit (seq.nth es k))) (seq.extract es 0 (+ k 1))))
(define-fun exit_ok () Bool (= (seq.++ out buf) (seq.++ out (seq.extract es 0 k))))
(assert (not (and base_ok step_ok exit_ok)))
(check-sat)
