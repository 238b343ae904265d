; summary: a host count `s <cmp> C` over tolist()'s float64 values equals torch's `T <cmp> C` element by element when the threshold C is exactly representable in T's dtype: for every float32, float16 and bfloat16 element value (NaN, +-inf, -0.0 included), every such C and each of >, >=, <, <=, ==, !=, comparing in T's dtype after rounding C (and, for float16/bfloat16, in float32 after upcasting) gives Python's answer.
; rule: host-count-reduction (count-compare-exact obligation)
; expect: unsat
; arithmetic: IEEE 754 in the FloatingPoint theory, RNE: binary32 (_ FloatingPoint 8 24), binary16 (_ FloatingPoint 5 11), bfloat16 (_ FloatingPoint 8 8), binary64 (_ FloatingPoint 11 53); never reals
; model: Tensor.tolist() converts each element exactly to a Python float (float64); Python compares two floats
;   in double precision; torch converts the Python float C to T's dtype (round to nearest even) and compares
;   there; CPU kernels and inductor may instead upcast float16/bfloat16 to float32 and round C to float32.
;   "C exactly representable in T's dtype": C64 = to_fp64(c) for some value c of T's dtype. For a C that is
;   not (C = 0.1 on float32), the per-rewrite obligation finds a counterexample (s = fp32(0.1)).
(set-logic QF_FP)
(define-sort F64 () (_ FloatingPoint 11 53))
(define-sort F32 () (_ FloatingPoint 8 24))
(define-sort F16 () (_ FloatingPoint 5 11))
(define-sort BF16 () (_ FloatingPoint 8 8))
; float32: the element x and a threshold c exact in float32
(declare-const x32 F32)
(declare-const c32 F32)
(define-fun C32 () F64 ((_ to_fp 11 53) RNE c32))
(define-fun X32 () F64 ((_ to_fp 11 53) RNE x32))
(define-fun R32 () F32 ((_ to_fp 8 24) RNE C32))
(define-fun ok32 () Bool
  (and (= (fp.gt X32 C32) (fp.gt x32 R32)) (= (fp.geq X32 C32) (fp.geq x32 R32))
       (= (fp.lt X32 C32) (fp.lt x32 R32)) (= (fp.leq X32 C32) (fp.leq x32 R32))
       (= (fp.eq X32 C32) (fp.eq x32 R32)) (= (not (fp.eq X32 C32)) (not (fp.eq x32 R32)))))
; float16: in float16, and in float32 after upcasting
(declare-const x16 F16)
(declare-const c16 F16)
(define-fun C16 () F64 ((_ to_fp 11 53) RNE c16))
(define-fun X16 () F64 ((_ to_fp 11 53) RNE x16))
(define-fun R16 () F16 ((_ to_fp 5 11) RNE C16))
(define-fun U16 () F32 ((_ to_fp 8 24) RNE x16))
(define-fun S16 () F32 ((_ to_fp 8 24) RNE C16))
(define-fun ok16 () Bool
  (and (= (fp.gt X16 C16) (fp.gt x16 R16)) (= (fp.geq X16 C16) (fp.geq x16 R16))
       (= (fp.lt X16 C16) (fp.lt x16 R16)) (= (fp.leq X16 C16) (fp.leq x16 R16))
       (= (fp.eq X16 C16) (fp.eq x16 R16))
       (= (fp.gt X16 C16) (fp.gt U16 S16)) (= (fp.geq X16 C16) (fp.geq U16 S16))
       (= (fp.lt X16 C16) (fp.lt U16 S16)) (= (fp.leq X16 C16) (fp.leq U16 S16))
       (= (fp.eq X16 C16) (fp.eq U16 S16))))
; bfloat16: in bfloat16, and in float32 after upcasting
(declare-const xb BF16)
(declare-const cb BF16)
(define-fun CB () F64 ((_ to_fp 11 53) RNE cb))
(define-fun XB () F64 ((_ to_fp 11 53) RNE xb))
(define-fun RB () BF16 ((_ to_fp 8 8) RNE CB))
(define-fun UB () F32 ((_ to_fp 8 24) RNE xb))
(define-fun SB () F32 ((_ to_fp 8 24) RNE CB))
(define-fun okb () Bool
  (and (= (fp.gt XB CB) (fp.gt xb RB)) (= (fp.geq XB CB) (fp.geq xb RB))
       (= (fp.lt XB CB) (fp.lt xb RB)) (= (fp.leq XB CB) (fp.leq xb RB))
       (= (fp.eq XB CB) (fp.eq xb RB))
       (= (fp.gt XB CB) (fp.gt UB SB)) (= (fp.geq XB CB) (fp.geq UB SB))
       (= (fp.lt XB CB) (fp.lt UB SB)) (= (fp.leq XB CB) (fp.leq UB SB))
       (= (fp.eq XB CB) (fp.eq UB SB))))
; the threshold is a number (a Python literal is never NaN)
(assert (not (fp.isNaN c32)))
(assert (not (fp.isNaN c16)))
(assert (not (fp.isNaN cb)))
(assert (not (and ok32 ok16 okb)))
(check-sat)
