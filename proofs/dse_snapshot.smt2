; summary: a deferred effect shows the snapshot cloned at its program point; writes after that point reach only the source tensor's storage, never the snapshot, so what is shown equals what eager showed (for every float32 element value, NaN included).
; rule: deferred-side-effects (snapshot-before-mutation)
; expect: unsat
; arithmetic: heap of storages (Array Int (Array Int float32)); IEEE 754 binary32 elements, structural equality
; model: clone allocates a fresh storage id and copies the source's contents; an in-place update
;   writes the source's storage; the replay reads the snapshot's storage.
(set-logic ALL)
(define-sort F32 () (_ FloatingPoint 8 24))
(declare-const heap0 (Array Int (Array Int F32)))
(declare-const src Int)
(declare-const snap Int)
(declare-const fresh_ok Bool)
(assert (not (= snap src)))                            ; clone: a new storage
(define-fun heap1 () (Array Int (Array Int F32)) (store heap0 snap (select heap0 src)))
; later in-place update x[i] = v on the source (any index, any value)
(declare-const i Int)
(declare-const v F32)
(define-fun heap2 () (Array Int (Array Int F32)) (store heap1 src (store (select heap1 src) i v)))
(declare-const j Int)
; eager showed x[j] at the call; the replay shows snapshot[j] after the update
(assert (not (= (select (select heap2 snap) j) (select (select heap0 src) j))))
(check-sat)
