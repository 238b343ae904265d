; summary: a gated torch.where selection, where(K, A(gate(K, x)), B(gate(not K, x))) with gate(c, v) = where(c, v, v.detach()), gives x the gradient of the original `A(x) if K else B(x)` for every upstream gradient g and for ANY backward of the sides (ga, gb: what A's and B's backward send to their input for the gradient they receive, NaN and inf allowed), for both values of K (equal as IEEE values; a zero's sign may differ), unlike the ungated where(K, A(x), B(x)), whose untaken side's ga(+0) = NaN (0 * inf) reaches x.
; rule: predicated-control-flow (gradient-gated obligation, cases 204/205 of the held-out round 2)
; expect: unsat
; arithmetic: IEEE 754 binary32 as (_ FloatingPoint 8 24), RNE; PyTorch backward formulas (derivatives.yaml): where: (where(c, g, 0), where(c, 0, g)); detach: no gradient; gradients accumulate by fp.add
; equality: NaN exactly where the original is NaN, elsewhere fp.eq (the accumulation g + (+0.0) turns -0.0 into +0.0)
; method: the sides' backward are uninterpreted functions of the gradient they receive (for the fixed forward
;   values of one call), so the lemma holds for every side; the static screen of the gradient-gated check
;   establishes that x reaches each side only through its gate.
(set-logic ALL)
(define-sort F () (_ FloatingPoint 8 24))
(declare-fun ga (F) F)
(declare-fun gb (F) F)
(declare-const K Bool)
(declare-const g F)                                         ; upstream gradient, finite
(assert (not (or (fp.isNaN g) (fp.isInfinite g))))
(define-fun zero () F (_ +zero 8 24))
; original: only the taken side runs, and its backward receives g
(define-fun g_orig () F (ite K (ga g) (gb g)))
; mended: the selection's backward, then each side's backward, then each gate's where backward
(define-fun to_a () F (ite K g zero))
(define-fun to_b () F (ite K zero g))
(define-fun via_a () F (ite K (ga to_a) zero))              ; gate(K, x)
(define-fun via_b () F (ite (not K) (gb to_b) zero))        ; gate(not K, x)
(define-fun g_x () F (fp.add RNE via_a via_b))
(assert (not (ite (fp.isNaN g_orig) (fp.isNaN g_x) (fp.eq g_x g_orig))))
(check-sat)
