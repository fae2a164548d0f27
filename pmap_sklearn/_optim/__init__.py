"""The optimisers every learner shares: one SGD engine (:mod:`.sgd`: schedules, AdaGrad,
averaging, L1, early stopping) with its bounded step-size search (:mod:`.step_search`) and
its data-parallel epochs (:mod:`.shards`, iterative parameter mixing), one
L-BFGS / OWL-QN (:mod:`.lbfgs`), and every ``"auto"`` rule of the estimators as a named
constant (:mod:`.defaults`). A learner supplies its gradient oracle, not its loop."""
