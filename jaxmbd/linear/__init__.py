"""Linear solvers of the Newton systems: dense LU (:mod:`jaxmbd.newton`, with the batched
elimination and the inverse of :mod:`jaxmbd.linear.dense`) and structured block elimination
on the body-joint graph (:mod:`jaxmbd.linear.structured`)."""
