"""Linear solvers of the Newton systems: dense LU (:mod:`jaxmbd.newton`) and structured
block elimination on the body-joint graph (:mod:`jaxmbd.linear.structured`)."""
