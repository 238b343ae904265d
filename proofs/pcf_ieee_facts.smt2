; summary: the IEEE float32 facts used by pcf_guarded_sqrt_gradient.smt2: sqrt(1) = 1 and +0 / 2 = +0 (and -0 / 2 = -0), in round-to-nearest-even.
; rule: predicated-control-flow (finite-gradient obligation)
; expect: unsat
; arithmetic: IEEE 754 binary32 as (_ FloatingPoint 8 24), RNE; structural equality
(set-logic ALL)
(define-sort F () (_ FloatingPoint 8 24))
(define-fun one () F ((_ to_fp 8 24) RNE 1.0))
(define-fun two () F ((_ to_fp 8 24) RNE 2.0))
(assert (not (and (= (fp.sqrt RNE one) one)
                  (= (fp.div RNE (_ +zero 8 24) two) (_ +zero 8 24))
                  (= (fp.div RNE (_ -zero 8 24) two) (_ -zero 8 24)))))
(check-sat)
