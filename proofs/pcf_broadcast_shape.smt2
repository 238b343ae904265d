; summary: broadcasting (right-aligned; sizes equal or 1) a tensor of any rank and symbolic sizes with a Python scalar or 0-dim tensor, or with a tensor of its own shape, gives back its shape and cannot raise; so an elementwise expression of one tensor and scalars has the tensor's shape.
; rule: predicated-control-flow (same-shape / untaken-side-cannot-raise obligations)
; expect: unsat
; arithmetic: linear integer arithmetic; a shape is (rank, array from dim index to size)
; model: out_rank = max(ra, rb); aligned from the right, dim i of the output is a's size unless a
;   has no dim there or it is 1, then b's; broadcasting raises unless each aligned pair is equal or
;   has a 1 (torch.broadcast_shapes).
(set-logic ALL)
(declare-const ra Int)
(declare-const rb Int)
(declare-const A (Array Int Int))
(declare-const B (Array Int Int))
(assert (>= ra 0))
(assert (>= rb 0))
(assert (forall ((i Int)) (>= (select A i) 0)))
(assert (forall ((i Int)) (>= (select B i) 0)))
(define-fun r () Int (ite (>= ra rb) ra rb))
; size of a's dim aligned with output dim i (1 where a has no such dim)
(define-fun ad ((i Int)) Int (ite (>= i (- r ra)) (select A (- i (- r ra))) 1))
(define-fun bd ((i Int)) Int (ite (>= i (- r rb)) (select B (- i (- r rb))) 1))
(define-fun outd ((i Int)) Int (ite (= (ad i) 1) (bd i) (ad i)))
(define-fun compatible () Bool (forall ((i Int)) (=> (and (<= 0 i) (< i r)) (or (= (ad i) (bd i)) (= (ad i) 1) (= (bd i) 1)))))
(define-fun same_as_a () Bool (and (= r ra) (forall ((i Int)) (=> (and (<= 0 i) (< i r)) (= (outd i) (select A i))))))
(assert (not (and (=> (= rb 0) (and compatible same_as_a))
                  (=> (and (= rb ra) (= B A)) (and compatible same_as_a)))))
(check-sat)
