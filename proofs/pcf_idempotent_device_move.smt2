; summary: x.to(d) is idempotent (x.to(d).to(d) == x.to(d)), so running `self.a = self.a.to(d)` on every path instead of one leaves self.a on device d with the same contents as any path of the original that ran it.
; rule: predicated-control-flow (hoisted idempotent device move, LongRoPE)
; expect: unsat
; arithmetic: uninterpreted devices and contents
; model: Tensor.to(d) returns the tensor itself when it is already on d, else a copy on d with equal contents.
(set-logic ALL)
(declare-sort Device 0)
(declare-sort Contents 0)
(declare-datatypes () ((Tensor (mk (dev Device) (val Contents)))))
(define-fun to ((x Tensor) (d Device)) Tensor (ite (= (dev x) d) x (mk d (val x))))
(declare-const a Tensor)
(declare-const d Device)
(assert (not (and (= (to (to a d) d) (to a d)) (= (val (to a d)) (val a)) (= (dev (to a d)) d))))
(check-sat)
