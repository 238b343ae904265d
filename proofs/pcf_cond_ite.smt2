; summary: for a single-element bool predicate p and pure branches f, g (functions of the values they read; no state written), torch.cond(p, f, g) equals `f() if p else g()` in value, in the gradient it passes back (only the taken branch is differentiated: no 0 * NaN term from the untaken side, unlike torch.where) and in the state after it, for every float32 value (NaN, +-inf, -0.0 included); a `.clone()` that replaces a returned input equals that input element by element.
; rule: predicated-control-flow (if/else -> torch.cond when the untaken side must not run)
; expect: unsat
; arithmetic: float32 (_ FloatingPoint 8 24) element arrays, uninterpreted pure branches and their backward, uninterpreted state
(set-logic ALL)
(define-sort F () (_ FloatingPoint 8 24))
(define-sort T () (Array Int F))
(declare-sort State 0)
(declare-const st State)
(declare-const p Bool)
(declare-const x T)
(declare-const u T)
; pure branches: their value depends only on what they read, and they leave the state as it was
(declare-fun f (T) T)
(declare-fun g (T) T)
(declare-fun run_f (State T) State)
(declare-fun run_g (State T) State)
(assert (forall ((s State) (a T)) (= (run_f s a) s)))
(assert (forall ((s State) (a T)) (= (run_g s a) s)))
; their backward (vector-Jacobian products), which may be NaN anywhere
(declare-fun df (T T) T)
(declare-fun dg (T T) T)
; the original: `if p: y = f(x) else: y = g(x)` -- one side runs, one side is differentiated
(define-fun y_if () T (ite p (f x) (g x)))
(define-fun grad_if () T (ite p (df x u) (dg x u)))
(define-fun st_if () State (ite p (run_f st x) (run_g st x)))
; torch.cond(p, f, g): the HOP evaluates the selected branch and its backward differentiates that branch only
(define-fun y_cond () T (ite p (f x) (g x)))
(define-fun grad_cond () T (ite p (df x u) (dg x u)))
(define-fun st_cond () State (ite p (run_f st x) (run_g st x)))
; `else: y = x` becomes `lambda: x.clone()`: a new array with the same elements, gradient passed through
(define-fun clone0 ((a T)) T (lambda ((i Int)) (select a i)))
(assert (not (and (= y_if y_cond) (= grad_if grad_cond) (= st_if st_cond)
                  (= (clone0 x) x)
                  (= (ite p (f x) x) (ite p (f x) (clone0 x))))))
(check-sat)
