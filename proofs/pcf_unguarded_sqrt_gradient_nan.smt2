; summary: refutation: the naive rewrite where(s > 0, sqrt(s), s) has a NaN gradient for some float32 s where the predicate selects s (e.g. s = -1: 0 / (2 * sqrt(-1)) = NaN), so the finite-gradient obligation cannot be proved for it.
; rule: predicated-control-flow (finite-gradient obligation, shared/cases 012)
; expect: sat
; arithmetic: IEEE 754 binary32 as (_ FloatingPoint 8 24), RNE; sqrt backward g / (2 * result)
(set-logic ALL)
(define-sort F () (_ FloatingPoint 8 24))
(declare-const s F)
(define-fun zero () F (_ +zero 8 24))
(define-fun two () F ((_ to_fp 8 24) RNE 2.0))
(define-fun c () Bool (fp.gt s zero))
(define-fun g_sqrt () F zero)                               ; untaken: where gives it a zero gradient
(define-fun g_s () F (fp.div RNE g_sqrt (fp.mul RNE two (fp.sqrt RNE s))))
(assert (not c))
(assert (not (or (fp.isNaN s) (fp.isInfinite s))))
(assert (or (fp.isNaN g_s) (fp.isInfinite g_s)))
(check-sat)
