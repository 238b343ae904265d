; summary: for a function G whose body is `if P: return` followed by B, with P pure and deterministic (it reads the state and changes nothing, raising or not as the state decides), the statement `if not P: G()` leaves the same state, raises exactly when and what `G()` raises, on every state: the hoisted check and G's own check agree, so G's body runs under the same conditions.
; rule: setup-guard (guard-hoisted)
; expect: unsat
; arithmetic: an uninterpreted sort of program states and of exceptions, uninterpreted functions
; model: an outcome is (raised?, exception, state). P(s) raises r(s) when pr(s) holds and leaves s
;   unchanged (pure: its reads run no code that writes, guard-read-plain); else its value is p(s).
;   G's body B maps s to an outcome (bo, be, bs), arbitrary. Call arguments are names or
;   literals (their evaluation changes nothing, so P sees the same state in both frames).
(set-logic ALL)
(declare-sort State 0)
(declare-sort Exc 0)
(declare-fun pr (State) Bool)        ; P raises
(declare-fun r (State) Exc)          ; what P raises
(declare-fun p (State) Bool)         ; P's value
(declare-fun braise (State) Bool)    ; B raises
(declare-fun bexc (State) Exc)
(declare-fun bstate (State) State)   ; B's final state (raising or not)
(declare-const s State)
; G() from s: P, then return (s unchanged) or B
(define-fun g_raised ((x State)) Bool (ite (pr x) true (ite (p x) false (braise x))))
(define-fun g_exc ((x State)) Exc (ite (pr x) (r x) (bexc x)))
(define-fun g_state ((x State)) State (ite (pr x) x (ite (p x) x (bstate x))))
; `if not P: G()` from s: the hoisted P, then G() (which evaluates P again, from the same s)
(define-fun h_raised ((x State)) Bool (ite (pr x) true (ite (p x) false (g_raised x))))
(define-fun h_exc ((x State)) Exc (ite (pr x) (r x) (g_exc x)))
(define-fun h_state ((x State)) State (ite (pr x) x (ite (p x) x (g_state x))))
(assert (not (and (= (h_raised s) (g_raised s))
                  (= (h_state s) (g_state s))
                  (=> (g_raised s) (= (h_exc s) (g_exc s))))))
(check-sat)
