"""kernbench.benches.studies — the milestone studies as data: named grids, point functions, analytic models."""
