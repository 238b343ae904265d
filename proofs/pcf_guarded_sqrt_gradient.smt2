; summary: the guarded rewrite where(s > 0, sqrt(where(s > 0, s, 1)), s) has the gradient of `sqrt(s) if s > 0 else s` for every float32 s (NaN, +-inf, -0.0 included) and every finite upstream gradient (equal as IEEE values; a zero's sign may differ), unlike where(s > 0, sqrt(s), s).
; rule: predicated-control-flow (finite-gradient obligation, shared/cases 012)
; expect: unsat
; arithmetic: IEEE 754 binary32 as (_ FloatingPoint 8 24), RNE; PyTorch backward formulas: sqrt: g / (2 * result); where: (where(c, g, 0), where(c, 0, g)); gradients accumulate by fp.add
; equality: NaN exactly where the original is NaN, elsewhere fp.eq (the accumulation g + (+0.0) turns -0.0 into +0.0)
; method: sqrt and division are uninterpreted functions constrained by the two IEEE facts the proof
;   needs (sqrt(1) = 1 and +0 / 2 = +0, both checked in pcf_ieee_facts.smt2); the lemma holds for every
;   pair of functions with these facts, so for IEEE sqrt and division (bit-blasting them times out).
(set-logic ALL)
(define-sort F () (_ FloatingPoint 8 24))
(declare-fun fsqrt (F) F)
(declare-fun fdiv (F F) F)
(declare-const s F)
(declare-const g F)                                         ; upstream gradient, finite
(assert (not (or (fp.isNaN g) (fp.isInfinite g))))
(define-fun zero () F (_ +zero 8 24))
(define-fun one () F ((_ to_fp 8 24) RNE 1.0))
(define-fun two () F ((_ to_fp 8 24) RNE 2.0))
(assert (= (fsqrt one) one))
(assert (= (fdiv zero two) zero))
(define-fun c () Bool (fp.gt s zero))
; original: if s > 0: y = sqrt(s) else: y = s
(define-fun g_orig () F (ite c (fdiv g (fp.mul RNE two (fsqrt s))) g))
; mended: both sides run
(define-fun safe () F (ite c s one))                        ; inner where(s > 0, s, 1)
(define-fun r () F (fsqrt safe))
(define-fun g_sqrt () F (ite c g zero))                     ; outer where's backward, sqrt side
(define-fun g_safe () F (fdiv g_sqrt (fp.mul RNE two r)))
(define-fun g_s () F (fp.add RNE (ite c g_safe zero) (ite c zero g)))
(assert (not (ite (fp.isNaN g_orig) (fp.isNaN g_s) (fp.eq g_s g_orig))))
(check-sat)
