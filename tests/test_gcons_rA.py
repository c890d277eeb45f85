"""Every hand-coded rA quantity (Table 2 Jacobian rows, nu, gamma of eq. 18) against autodiff.

The reference is autodiff of the *constraint values* (independent kernels) under the
perturbation A -> A exp(theta_bar~) at theta_bar = 0 (Jacobian), of -dPhi/dt (nu), and of
-d^2/ds^2 Phi(r + s r_dot, A exp(s omega_bar~), t + s) (gamma), on random bodies with
nonzero offsets, spinning bodies and time-dependent drivers, for every GCON type.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

from jaxmbd import ModelBuilder, so3_exp
from jaxmbd.constraints.equations import (
    constraint_values,
    rA_generalized_reaction,
    rA_jacobian_from_rows,
    rA_rows,
    rA_terms,
)


def random_model(rng, kinds=("DP1", "DP2", "D", "CD", "ROT"), per_kind=3):
    b = ModelBuilder("random")
    names = ["b0", "b1", "b2"]
    for name in names:
        w = rng.normal(size=3)
        b.add_body(
            name,
            mass=1.0 + rng.uniform(),
            inertia=[1.0, 2.0, 2.5],
            r=rng.normal(size=3),
            A=np.asarray(so3_exp(w)),
            rdot=rng.normal(size=3),
            omega=3.0 * rng.normal(size=3),
        )
    pairs = [("b0", "b1"), ("b1", "ground"), ("ground", "b2"), ("b2", "b0"), ("b1", "b2")]
    exprs = ["0.3*sin(2*t) + 0.1", "cos(1.5*t)", "0.2*t**2 - 0.4", "0.5"]
    k = 0
    for kind in kinds:
        for n in range(per_kind):
            bi, bj = pairs[(k + n) % len(pairs)]
            f = exprs[(k + n) % len(exprs)]
            name = f"{kind}_{n}"
            vec = lambda: rng.normal(size=3)  # noqa: E731
            if kind == "DP1":
                b.add_dp1(name, body_i=bi, a_bar_i=vec(), body_j=bj, a_bar_j=vec(), f=f)
            elif kind == "DP2":
                b.add_dp2(
                    name, body_i=bi, a_bar_i=vec(), s_bar_p_i=vec(), body_j=bj, s_bar_q_j=vec(), f=f
                )
            elif kind == "D":
                b.add_d(
                    name,
                    body_i=bi,
                    s_bar_p_i=vec(),
                    body_j=bj,
                    s_bar_q_j=vec(),
                    f="1.5 + 0.3*sin(t)",
                )
            elif kind == "CD":
                b.add_cd(name, c=vec(), body_i=bi, s_bar_p_i=vec(), body_j=bj, s_bar_q_j=vec(), f=f)
            else:
                u = vec()
                u /= np.linalg.norm(u)
                v = np.cross(u, vec())
                v /= np.linalg.norm(v)
                b.add_rot(
                    name,
                    body_i=bi,
                    u_bar_i=u,
                    v_bar_i=v,
                    body_j=bj,
                    a_bar_j=vec(),
                    angle="0.7 + 2.0*t + 0.3*sin(3*t)",
                )
        k += 1
    return b.build()


# The checks below compare compiled programs (one per model and function): op by op, the
# autodiff references took several hundred small compilations per test.
def per_type_values(model, r, A, t):
    """Phi from the per-type value kernels (eqs. 1-4, ROT), not the one-batch rows."""
    zero = jnp.zeros_like(r)
    return rA_terms(model, r, A, zero, zero, t)[0]


def autodiff_terms(model, r, A, rdot, omega, t, values=per_type_values):
    def phi_pert(delta, s):
        d = delta.reshape(model.nb, 6)
        return values(model, r + d[:, :3], A @ so3_exp(d[:, 3:]), s)

    zero = jnp.zeros(6 * model.nb)
    G = jax.jacfwd(phi_pert)(zero, t)
    nu = -jax.jacfwd(lambda s: phi_pert(zero, s))(t)

    def along(s):
        return values(model, r + s * rdot, A @ so3_exp(s * omega), t + s)

    second = jax.jacfwd(jax.jacfwd(along))(0.0)
    return values(model, r, A, t), G, nu, -second


autodiff_terms = jax.jit(autodiff_terms, static_argnames="values")
terms = jax.jit(rA_terms)


@pytest.mark.parametrize("kind", ["DP1", "DP2", "D", "CD", "ROT"])
def test_rA_terms_match_autodiff(rng, kind):
    model = random_model(rng, kinds=(kind,))
    for t in (0.0, 0.37, 1.9):
        r, A = model.r0, model.A0
        phi, G, nu, gamma = terms(model, r, A, model.rdot0, model.omega0, t)
        phi_ad, G_ad, nu_ad, gamma_ad = autodiff_terms(model, r, A, model.rdot0, model.omega0, t)
        np.testing.assert_allclose(phi, phi_ad, rtol=0, atol=ROUND_OFF * np.abs(phi_ad).max())
        np.testing.assert_allclose(G, G_ad, rtol=0, atol=ROUND_OFF * np.abs(G_ad).max())
        np.testing.assert_allclose(nu, nu_ad, rtol=0, atol=ROUND_OFF * np.abs(nu_ad).max())
        np.testing.assert_allclose(gamma, gamma_ad, rtol=0, atol=ROUND_OFF * np.abs(gamma_ad).max())


def test_rA_terms_mixed_model_row_order(rng):
    """All types together: rows come back in model order, columns body-major."""
    model = random_model(rng, per_kind=2)
    t = 0.8
    r, A = model.r0, model.A0
    out = terms(model, r, A, model.rdot0, model.omega0, t)
    ref = autodiff_terms(model, r, A, model.rdot0, model.omega0, t)
    for ours, theirs in zip(out, ref, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=ROUND_OFF * np.abs(theirs).max())
    # a body that no constraint touches has zero columns; ground has none at all
    assert out[1].shape == (model.nc, 6 * model.nb)


def test_published_dp1_row_of_table2_is_wrong_as_printed(rng):
    """Guard against the OCR'd Table 2 DP1 theta_i entry (-a_i^T A_j^T A_i a_i~)."""
    model = random_model(rng, kinds=("DP1",), per_kind=1)
    s = model.gcon("DP1")
    A_all = jnp.concatenate([model.A0, jnp.eye(3)[None]])
    A_i, A_j = A_all[s.body_i[0]], A_all[s.body_j[0]]
    a_i = s.a_bar_i[0]
    printed = -a_i @ A_j.T @ A_i @ jnp.asarray(np.cross(np.eye(3), a_i).T)
    _, G, _, _ = rA_terms(model, model.r0, model.A0, model.rdot0, model.omega0, 0.0)
    col = 6 * s.body_i[0] + 3
    assert not np.allclose(G[0, col : col + 3], printed, atol=1e-6)


def test_unified_rows_match_per_type_kernels_and_autodiff(rng):
    """The one-batch rows (Phi = u.w - beta f) used on the Newton hot path equal the per-type
    kernels (values and Table 2 rows) and autodiff of their own values, for all five types."""
    model = random_model(rng, per_kind=3)
    lam = jnp.asarray(rng.normal(size=model.nc))

    @jax.jit
    def rows(model, r, A, t, lam):
        phi, jac_i, jac_j = rA_rows(model, r, A, t)
        reaction = rA_generalized_reaction(model, jac_i, jac_j, lam)
        return phi, rA_jacobian_from_rows(model, jac_i, jac_j), reaction

    for t in (0.0, 0.8):
        r, A = model.r0, model.A0
        phi, G, reaction = rows(model, r, A, t, lam)
        phi_types, G_types, _, _ = terms(model, r, A, model.rdot0, model.omega0, t)
        np.testing.assert_allclose(phi, phi_types, rtol=0, atol=ROUND_OFF * np.abs(phi_types).max())
        np.testing.assert_allclose(G, G_types, rtol=0, atol=ROUND_OFF * np.abs(G_types).max())
        for values in (per_type_values, constraint_values):
            _, G_ad, _, _ = autodiff_terms(model, r, A, model.rdot0, model.omega0, t, values)
            np.testing.assert_allclose(G, G_ad, rtol=0, atol=ROUND_OFF * np.abs(G_ad).max())
        want = G_types.T @ lam
        np.testing.assert_allclose(
            reaction.reshape(-1), want, rtol=0, atol=ROUND_OFF * np.abs(want).max()
        )
