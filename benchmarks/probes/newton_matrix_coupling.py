"""Is the top-left block H = M + c_v D + c_q K T of the rA Newton matrix block-diagonal per
body? (A Schur complement on a block-diagonal H would be exact only then.)

    python -m benchmarks.probes.newton_matrix_coupling

Prints, for the implicit step's Newton matrix at a perturbed state (the matrices of
``tests/test_small_structured.py``, c_q = 1e-4), the largest entry of H's off-diagonal body
blocks against the largest of its diagonal blocks. Revolute joints couple their two bodies
through K = d(G^T lam)/dq (their perpendicularity rows depend on both orientations);
spherical joints do not (a chain of them has a block-diagonal H).
"""

import argparse

import numpy as np

from benchmarks._tests import from_tests


def main(argv=None):
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args(argv)
    # the tests' conftest first: it configures jax's compilation cache before jax loads
    from_tests("conftest")
    _step_matrices = from_tests("test_small_structured")._step_matrices
    import jaxmbd as mbd

    MODELS = [
        ("double_pendulum", mbd.models.double_pendulum),
        ("slider_crank", mbd.models.slider_crank),
        ("chain4 (spherical)", lambda: mbd.models.pendulum_chain(4)),
    ]
    for name, make in MODELS:
        model = make()
        nb = model.nb
        for stabilised in (False, True):
            dense, _ = _step_matrices(model, stabilised=stabilised)
            H = dense[: 6 * nb, : 6 * nb]

            def block(i, j, H=H):
                return np.abs(H[6 * i : 6 * i + 6, 6 * j : 6 * j + 6]).max()

            diag = max(block(i, i) for i in range(nb))
            off = max((block(i, j) for i in range(nb) for j in range(nb) if i != j), default=0.0)
            print(
                f"{name:20s} stabilised={stabilised!s:5s}: max |H_ij| (i != j) = {off:.3e}, "
                f"max |H_ii| = {diag:.3e}"
            )


if __name__ == "__main__":
    main()
