; summary: the ceil of an int64 true division plus an int, ceil(fl(fl(a / s) + c)), equals the exact ceil division -(-a // s) + c for every integer |a| < 2^22, every s in [1, 64] and every int |c| <= 8, in float32 and in float64, under the IEEE rounding bound (each correctly rounded result x' of an exact x has |x' - x| <= |x| * 2^-24, and x' = x when x is representable).
; rule: constant-buffer (ceil-ratio-exact obligation)
; expect: unsat
; arithmetic: linear integer and real arithmetic over the standard model of IEEE rounding, not the FloatingPoint theory (that query, Float32 division with s up to 2^16, was unknown after 600 s); scaled by s so that every term is linear
; model: torch divides an int64 tensor by an int64 tensor in the default dtype (float32 or float64): a and s
;   convert exactly (|a| < 2^24), q' = fl(a / s) = a/s + e1 with |e1| <= |a/s| * u, then y = fl(q' + c) = q' + c + e2
;   with |e2| <= |q' + c| * u, u = 2^-24 (float32's unit roundoff; float64's 2^-53 is inside it). Where s divides a
;   both results are integers below 2^24 in magnitude, exact: e1 = e2 = 0. Every nonzero value here is at least 1/256 in
;   magnitude (normal range), so the relative bound holds. Scaled by s: P stands for s*k with r = a - P in [0, s-1]
;   (k = floor(a/s)); Cs for c*s, |Cs| <= 512; e1, e2 for s*e1, s*e2. The exact ceil is s*n = P + Cs + (s if r > 0),
;   and "ceil(y) = n" is n - 1 < y <= n, i.e. s*n - s < s*y <= s*n. P and Cs range over a superset of their values,
;   which only strengthens the lemma. tests/test_constant_buffer.py also enumerates every (a, s) for c = 1 with torch.
(set-logic QF_LIRA)
(declare-const a Int)
(declare-const s Int)
(declare-const P Int)
(declare-const Cs Int)
(declare-const e1 Real)
(declare-const e2 Real)
(define-fun u () Real (/ 1.0 16777216.0))
(define-fun absr ((x Real)) Real (ite (>= x 0.0) x (- x)))
(assert (and (< (- 4194304) a) (< a 4194304) (<= 1 s) (<= s 64) (<= (- 512) Cs) (<= Cs 512)))
(define-fun r () Int (- a P))
(assert (and (<= 0 r) (<= r (- s 1))))
(define-fun sn () Int (+ P Cs (ite (> r 0) s 0)))
; the first rounding: exact where s divides a
(assert (=> (= r 0) (= e1 0.0)))
(assert (<= (absr e1) (* (absr (to_real a)) u)))
(define-fun y0 () Real (+ (to_real a) e1 (to_real Cs)))
; the second rounding: exact where the first result is an integer
(assert (=> (= r 0) (= e2 0.0)))
(assert (<= (absr e2) (* (absr y0) u)))
(define-fun y () Real (+ y0 e2))
(assert (not (and (< (to_real (- sn s)) y) (<= y (to_real sn)))))
(check-sat)
