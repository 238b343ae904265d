; summary: for single-element tensors, Python's `a and b` / `a or b` / `not a` in an `if` test are true exactly when torch.logical_and / logical_or / logical_not of them are, for every float32 value (NaN is true, -0.0 is false) and every bool.
; rule: predicated-control-flow (tensor `and`/`or`/`not` -> torch.logical_*)
; expect: unsat
; arithmetic: IEEE 754 binary32 as (_ FloatingPoint 8 24); truth of a float tensor is `x != 0` (bool(tensor) and torch's cast to bool agree: NaN -> True, +-0.0 -> False)
; model: `bool(a and b)` calls bool() on a, then (if true) on b: its truth is truth(a) /\ truth(b);
;   torch.logical_and casts both operands to bool element-wise and ands them.
(set-logic ALL)
(declare-const x (_ FloatingPoint 8 24))
(declare-const y (_ FloatingPoint 8 24))
(declare-const u Bool)
(declare-const v Bool)
(define-fun py_truth ((f (_ FloatingPoint 8 24))) Bool (not (fp.isZero f)))
(define-fun to_bool ((f (_ FloatingPoint 8 24))) Bool (not (fp.eq f (_ +zero 8 24))))
; Python: `if x and y` / `if x or y` / `if not x`, each operand a one-element tensor
(define-fun py_and () Bool (ite (py_truth x) (py_truth y) false))
(define-fun py_or () Bool (ite (py_truth x) true (py_truth y)))
(define-fun py_not () Bool (not (py_truth x)))
; torch.logical_and(x, y) etc. on the same tensors
(define-fun th_and () Bool (and (to_bool x) (to_bool y)))
(define-fun th_or () Bool (or (to_bool x) (to_bool y)))
(define-fun th_not () Bool (not (to_bool x)))
; mixed bool / float operands
(define-fun py_and_mixed () Bool (ite u (py_truth x) false))
(define-fun th_and_mixed () Bool (and u (to_bool x)))
(define-fun py_or_bool () Bool (ite u true v))
(define-fun th_or_bool () Bool (or u v))
(assert (not (and (= py_and th_and) (= py_or th_or) (= py_not th_not)
                  (= py_and_mixed th_and_mixed) (= py_or_bool th_or_bool))))
(check-sat)
