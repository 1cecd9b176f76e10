print("benchmarks: not yet built")
