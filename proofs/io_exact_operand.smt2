; summary: a scalar read kept as a 0-d tensor reaches a kernel as the same operand as the Python number did: for a value e read from a float32 tensor that is exact in float16, the 'opmath' path (the Python number's float64 value read in float32) and the cast-first path (the 0-d tensor cast to float16, then upcast to float32) give the identical float32 operand (NaN, +-inf, -0.0 included), so every float16 kernel result is the same; the same for bfloat16; and for float32 arithmetic the Python number (e's exact float64) rounds to the 0-d float32 tensor's own value.
; rule: item-operand (item-operand-exact obligation)
; expect: unsat
; arithmetic: IEEE 754 in the FloatingPoint theory, RNE: binary32, binary16, bfloat16 (_ FloatingPoint 8 8), binary64; never reals
; model: `.item()` gives e's exact value as a Python float (float64). ATen converts a Python-number operand and a
;   0-d tensor operand to the common dtype C once each; where C is float16/bfloat16 a kernel may instead read the
;   scalar's original value in float32 ("opmath") and round the result to C. The per-rewrite obligation proves
;   "e is exact in C" for every value of the read's dtype, or refutes it with a value (0.1 from float32 into
;   float16); io_exact_operand_inexact.smt2 shows the two paths do differ without it.
(set-logic QF_FP)
(define-sort F64 () (_ FloatingPoint 11 53))
(define-sort F32 () (_ FloatingPoint 8 24))
(define-sort F16 () (_ FloatingPoint 5 11))
(define-sort BF16 () (_ FloatingPoint 8 8))
(declare-const e F32)
(define-fun E64 () F64 ((_ to_fp 11 53) RNE e))                 ; the Python float
; float16: opmath path (Python number: its float64 value read in float32) vs cast-first path (0-d float32 -> float16 -> float32)
(define-fun C16 () F16 ((_ to_fp 5 11) RNE e))
(define-fun exact16 () Bool (or (fp.isNaN e) (= ((_ to_fp 8 24) RNE C16) e)))
(define-fun opmath16 () F32 ((_ to_fp 8 24) RNE E64))
(define-fun cast16 () F32 ((_ to_fp 8 24) RNE C16))
; bfloat16, the same two paths
(define-fun CB () BF16 ((_ to_fp 8 8) RNE e))
(define-fun exactb () Bool (or (fp.isNaN e) (= ((_ to_fp 8 24) RNE CB) e)))
(define-fun opmathb () F32 ((_ to_fp 8 24) RNE E64))
(define-fun castb () F32 ((_ to_fp 8 24) RNE CB))
; float32 common dtype: the Python float64 rounded to float32 is the 0-d float32 value itself
(define-fun same32 () Bool (= ((_ to_fp 8 24) RNE E64) e))
; `=` is SMT equality: identical IEEE values (one NaN; +0.0 and -0.0 distinct), so any kernel computes alike
(assert (not (and (=> exact16 (= opmath16 cast16)) (=> exactb (= opmathb castb)) same32)))
(check-sat)
