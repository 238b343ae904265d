; summary: for indices that all lie in [0, n) with n <= m, torch.bincount(idx, minlength=m) and torch.zeros(m).scatter_add_(0, idx, ones_like(idx)) agree: bincount's length max(m, max(idx) + 1) (m when idx is empty) is m, every index is a valid slot of the m-slot output (scatter_add_ raises on none), and each slot j holds the number of k < L with idx[k] = j in both.
; rule: bounded-bincount (bincount-in-range obligation)
; expect: unsat
; arithmetic: unbounded integers (Int), arrays Int -> Int; counts as sums of ones in int64, exact below 2**63 (L < 2**63)
; model: bincount(idx, minlength=m) has length max(m, 1 + max_k idx[k]) for L > 0 and m for L = 0, and slot j
;   holds #{k < L : idx[k] = j}; zeros(m).scatter_add_(0, idx, ones) adds 1 at slot idx[k] for every k < L and
;   raises unless 0 <= idx[k] < m; both count by the same definition, so the claim is the length and the bounds:
;   the negation asks for an index out of [0, m), or a maximum index whose successor exceeds m.
(set-logic ALL)
(declare-const L Int)            ; number of indices
(declare-const n Int)            ; the size of the reduced dimension the indices were taken along
(declare-const m Int)            ; minlength
(declare-const idx (Array Int Int))
(declare-const k Int)            ; a witness index position
; the indices of argmax/argmin/max/min/topk along a dimension of size n lie in [0, n)
(assert (>= L 0))
(assert (forall ((j Int)) (=> (and (>= j 0) (< j L)) (and (>= (select idx j) 0) (< (select idx j) n)))))
; the guard: m >= n
(assert (>= m n))
; negation: some index is not a valid slot of m, or makes bincount longer than m
(assert (and (>= k 0) (< k L)
             (or (< (select idx k) 0) (>= (select idx k) m) (> (+ (select idx k) 1) m))))
(check-sat)
