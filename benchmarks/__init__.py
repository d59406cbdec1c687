"""Benchmarks: notebook execution times against the chapter budgets, and our attention
layers against PyTorch's and d2l's. Run them with `make bench` (CPU) or `make bench-gpu`.
Results go to benchmarks/results/ (not tracked by git)."""
