; summary: replaying a memoised once-per-process logger method (transformers' warning_once, an lru_cache) through the same method, from the seen-set eager would have had, emits exactly when eager emits and leaves the same seen-set, and never emits a message twice.
; rule: deferred-side-effects (once-per-process)
; expect: unsat
; arithmetic: arrays from messages to Booleans (the cache), strings
; model: the method emits message m iff m is not in its seen-set, then adds m. The replay calls the
;   method itself (not a copy of it), so the seen-set is the process's; the replay runs the calls in
;   program order (dse_replay_order.smt2), so it starts from the seen-set the eager call had.
(set-logic ALL)
(declare-const seen (Array String Bool))
(declare-const seen_replay (Array String Bool))
(declare-const m String)
(assert (= seen_replay seen))
(define-fun emits ((s (Array String Bool)) (x String)) Bool (not (select s x)))
(define-fun after ((s (Array String Bool)) (x String)) (Array String Bool) (store s x true))
(assert (not (and (= (emits seen m) (emits seen_replay m))
                  (= (after seen m) (after seen_replay m))
                  (not (emits (after seen_replay m) m)))))
(check-sat)
