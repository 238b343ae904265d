; summary: for a function G whose body is `if P: return` followed by B, and a hoisted test H that is pure, deterministic and implies P (H is P behind a gate that requires each value P tests for truth to be a bool or None, so H runs no user code), the statement `if not H: G()` leaves the same state and raises exactly when and what `G()` raises, on every state: where H holds G would return at once, elsewhere G runs as before, its own check included.
; rule: setup-guard (guard-hoisted)
; expect: unsat
; arithmetic: an uninterpreted sort of program states and of exceptions, uninterpreted functions
;   The rule's H begins with `G is _mend_setup_guard_G` (the alias bound right after G's def):
;   where the called name is another function, H is false and that function is called, as in
;   the original; where it is G's def, the rest of H is the gated P and this query applies.
; model: an outcome is (raised?, exception, state). H(s) raises hr(s) when hrz(s) holds and leaves
;   s unchanged (pure: its reads run no code that writes, guard-read-plain); else its value is
;   h(s). H raises only where P raises, with P's exception (the same reads, in the same order:
;   the gate's type() of a part reads what P reads). P(s) raises r(s) when pr(s) and leaves s
;   unchanged when it does not raise and its value is true (G then returns); its value is p(s).
;   G's body B maps s to an outcome, arbitrary. Where P does not hold, P may run user code (a
;   __bool__): that happens inside G in both versions, from the same state.
(set-logic ALL)
(declare-sort State 0)
(declare-sort Exc 0)
(declare-fun hrz (State) Bool)       ; H raises
(declare-fun h (State) Bool)         ; H's value
(declare-fun pr (State) Bool)        ; P raises
(declare-fun r (State) Exc)          ; what P (and H) raise
(declare-fun p (State) Bool)         ; P's value
(declare-fun pstate (State) State)   ; the state after P when it is false (its __bool__ may write)
(declare-fun braise (State) Bool)    ; B raises
(declare-fun bexc (State) Exc)
(declare-fun bstate (State) State)   ; B's final state (raising or not)
(declare-const s State)
(assert (=> (hrz s) (pr s)))                    ; H raises only where P raises, with P's exception
(assert (=> (and (not (hrz s)) (h s)) (and (not (pr s)) (p s))))   ; H implies P
; G() from s: P, then return (s unchanged) or B from the state P left
(define-fun g_raised ((x State)) Bool (ite (pr x) true (ite (p x) false (braise (pstate x)))))
(define-fun g_exc ((x State)) Exc (ite (pr x) (r x) (bexc (pstate x))))
(define-fun g_state ((x State)) State (ite (pr x) x (ite (p x) x (bstate (pstate x)))))
; `if not H: G()` from s
(define-fun m_raised ((x State)) Bool (ite (hrz x) true (ite (h x) false (g_raised x))))
(define-fun m_exc ((x State)) Exc (ite (hrz x) (r x) (g_exc x)))
(define-fun m_state ((x State)) State (ite (hrz x) x (ite (h x) x (g_state x))))
(assert (not (and (= (m_raised s) (g_raised s))
                  (= (m_state s) (g_state s))
                  (=> (g_raised s) (= (m_exc s) (g_exc s))))))
(check-sat)
