; summary: two branches that end in the same call f(name, v1, rest) / f(name, v2, rest) equal one call f(name, where(p, v1, v2), rest) for a 0-dim predicate p, when v1, v2 agree in shape and dtype (where selects, so the argument is v1 or v2 element by element).
; rule: predicated-control-flow (paired register_buffer calls merged)
; expect: unsat
; arithmetic: float32 element arrays, uninterpreted call effect f
(set-logic ALL)
(define-sort F () (_ FloatingPoint 8 24))
(define-sort T () (Array Int F))
(declare-sort State 0)
(declare-fun f (State String T) State)
(declare-const st State)
(declare-const name String)
(declare-const p Bool)
(declare-const v1 T)
(declare-const v2 T)
(define-fun where0 ((c Bool) (a T) (b T)) T (lambda ((i Int)) (ite c (select a i) (select b i))))
(define-fun original () State (ite p (f st name v1) (f st name v2)))
(define-fun mended () State (f st name (where0 p v1 v2)))
(assert (not (= original mended)))
(check-sat)
