"""Static analyses of a canonical linalg module: nothing here executes the model.

* `labels`: readable op labels (`matmul`, `generic<subf,exp>`, `reduce<maximumf>`), the
  vocabulary every other analysis reports in;
* `cost`: exact per-op FLOPs and a floor on bytes moved, roofline class (`ledger` renders
  the reference's bytes ledger, `shapes` the GEMM shape histogram);
* `dispatch`: the same costs per fused dispatch as IREE forms them for a target;
* `opgraph`, `motifs`, `cones`: recurring op chains and repeated dataflow cones with
  fusion hints;
* `graph`: the module as Model Explorer's graph JSON (ops as nodes, SSA uses as edges).

`docs/analysis.md` has the rules and every deliberate difference from the reference.
"""
