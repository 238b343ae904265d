; summary: refutation: without the exactness premise, the float16 'opmath' path (the Python number's value read in float32) and the cast-first path (a 0-d float32 tensor cast to float16 first) give different float16 products for some float16 h and float32 e (e = 0.1 is one), so item-operand-exact must prove e exact in float16 before keeping a float32 read as a 0-d tensor that meets float16 tensors.
; rule: item-operand (item-operand-exact obligation)
; expect: sat
; arithmetic: IEEE 754 in the FloatingPoint theory, RNE: binary32, binary16, binary64; never reals
; model: as io_exact_operand.smt2, without the premise that e is exact in float16.
(set-logic QF_FP)
(define-sort F64 () (_ FloatingPoint 11 53))
(define-sort F32 () (_ FloatingPoint 8 24))
(define-sort F16 () (_ FloatingPoint 5 11))
(declare-const e F32)
(declare-const h16 F16)
(define-fun H16 () F32 ((_ to_fp 8 24) RNE h16))
(define-fun opmath () F32 ((_ to_fp 8 24) RNE ((_ to_fp 11 53) RNE e)))
(define-fun cast () F32 ((_ to_fp 8 24) RNE ((_ to_fp 5 11) RNE e)))
(assert (not (fp.isNaN e)))
(assert (not (fp.isNaN h16)))
(assert (not (= ((_ to_fp 5 11) RNE (fp.mul RNE H16 opmath)) ((_ to_fp 5 11) RNE (fp.mul RNE H16 cast)))))
(check-sat)
