; summary: `if c: raise E(msg)` and `torch._assert_async(torch.logical_not(c), marker)` raise for exactly the same single-element c (bool, int64, float32 with NaN/+-inf/-0.0), and the raised exception restored from the marker's table entry has the original type and message.
; rule: predicated-validation (tensor-guarded raise -> torch._assert_async)
; expect: unsat
; arithmetic: bool; int64 as (_ BitVec 64); IEEE 754 binary32 as (_ FloatingPoint 8 24); strings for type and message
; model: _assert_async(t) raises iff t is zero / False (aten::_assert_async: "Expected Tensor with single
;   nonzero value"); logical_not(c) is true iff c is zero; the runtime maps the marker to the table entry,
;   a lambda building the exception written from the original raise statement.
(set-logic ALL)
(declare-const cb Bool)
(declare-const ci (_ BitVec 64))
(declare-const cf (_ FloatingPoint 8 24))
(define-fun truth_f ((f (_ FloatingPoint 8 24))) Bool (not (fp.isZero f)))
(define-fun truth_i ((i (_ BitVec 64))) Bool (not (= i (_ bv0 64))))
; the original raises when the test is true
(define-fun orig_b () Bool cb)
(define-fun orig_i () Bool (truth_i ci))
(define-fun orig_f () Bool (truth_f cf))
; _assert_async(x) raises iff not truth(x); x = logical_not(c) is a bool tensor
(define-fun assert_raises ((x Bool)) Bool (not x))
(define-fun mended_b () Bool (assert_raises (not cb)))
(define-fun mended_i () Bool (assert_raises (not (truth_i ci))))
(define-fun mended_f () Bool (assert_raises (not (truth_f cf))))
; exception restored from the table entry (type, message) vs the original raise
(declare-const orig_type String)
(declare-const orig_msg String)
(declare-fun table_type (String) String)
(declare-fun table_msg (String) String)
(declare-const key String)
(assert (= (table_type key) orig_type))
(assert (= (table_msg key) orig_msg))
(assert (not (and (= orig_b mended_b) (= orig_i mended_i) (= orig_f mended_f)
                  (= (table_type key) orig_type) (= (table_msg key) orig_msg))))
(check-sat)
