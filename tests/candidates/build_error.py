# A CUDA build that fails at import, as nvcc or load_inline would report it.
class BuildError(RuntimeError):
    pass


raise BuildError("kernel.cu(3): error: identifier \"threadIdx_x\" is undefined")
