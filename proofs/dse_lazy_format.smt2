; summary: a lazy format that renders, at replay, the snapshot taken at the call with the f-string's own format spec gives the text the f-string gave at the call (induction over the placeholders: equal text so far plus an equal rendered part).
; rule: deferred-side-effects (lazy-format-equals-fstring)
; expect: unsat
; arithmetic: strings, uninterpreted values and an uninterpreted rendering function
; model: format(value, spec) is a function of the spec and the value's contents (render); the
;   f-string renders each value where the call is, the lazy format (mend.runtime.fmt) renders the
;   snapshot of it at replay with the same spec and literal text; the snapshot holds the value's
;   contents as they were at the call (dse_snapshot.smt2).
(set-logic ALL)
(declare-sort Value 0)
(declare-fun render (String Value) String)
(declare-const text_fstring String)     ; the f-string's text so far
(declare-const text_lazy String)        ; the lazy format's text so far
(declare-const literal String)          ; the literal text before the next placeholder
(declare-const spec String)             ; the placeholder's format spec
(declare-const value_at_call Value)
(declare-const snapshot Value)
(assert (= snapshot value_at_call))     ; dse_snapshot.smt2
; base case: no placeholder yet, both texts are the same literal prefix
(define-fun base_ok () Bool (= (str.++ literal "") (str.++ literal "")))
; inductive step: equal text so far, one more literal and placeholder each
(define-fun step_ok () Bool
  (=> (= text_fstring text_lazy)
      (= (str.++ text_fstring literal (render spec value_at_call))
         (str.++ text_lazy literal (render spec snapshot)))))
(assert (not (and base_ok step_ok)))
(check-sat)
