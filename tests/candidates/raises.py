def solution(x):
    raise RuntimeError("illegal memory access (simulated)")
