; summary: for a 0-dim boolean predicate p and float32 tensors a, b of equal shape, torch.where(p, a, b) equals `a if p else b` element by element, bit for bit, for every float32 value (NaN, +-inf, -0.0 included).
; rule: predicated-control-flow (if/else -> torch.where)
; expect: unsat
; arithmetic: IEEE 754 float32 as the Z3 FloatingPoint sort (_ FloatingPoint 8 24); never reals.
; equality: SMT-LIB `=` (structural: -0.0 and +0.0 differ, NaN equals NaN; SMT-LIB has one NaN,
;   so this is bit-identity up to NaN payload). fp.eq would be wrong here: it makes -0.0 equal
;   +0.0 and NaN unequal to itself.
; model: a tensor of n elements is an array from flat index to value; torch.where broadcasts the
;   0-dim condition to every index, converts both operands to the promoted dtype (here the
;   same dtype: the conversion is the identity, which the solver must show, NaN included) and
;   selects per element. The original `if p: y = a else: y = b` binds one whole tensor.
(set-logic ALL)
(declare-const p Bool)
(declare-const n Int)
(declare-const a (Array Int (_ FloatingPoint 8 24)))
(declare-const b (Array Int (_ FloatingPoint 8 24)))
(define-fun broadcast0 ((c Bool)) (Array Int Bool) ((as const (Array Int Bool)) c))
(define-fun to_promoted ((x (_ FloatingPoint 8 24))) (_ FloatingPoint 8 24) ((_ to_fp 8 24) RNE x))
(define-fun where ((c (Array Int Bool)) (x (Array Int (_ FloatingPoint 8 24))) (y (Array Int (_ FloatingPoint 8 24)))) (Array Int (_ FloatingPoint 8 24))
  (lambda ((i Int)) (ite (select c i) (to_promoted (select x i)) (to_promoted (select y i)))))
(define-fun original () (Array Int (_ FloatingPoint 8 24)) (ite p a b))
(declare-const i Int)
(assert (and (<= 0 i) (< i n)))
; negation of the lemma: some element differs
(assert (not (= (select (where (broadcast0 p) a b) i) (select original i))))
(check-sat)
