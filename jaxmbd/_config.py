"""Library-wide numerical settings.

jaxmbd works in float64 throughout (DESIGN principle 6): constraint residuals of 1e-12 and
the 1/h^2 scaling of index-3 dynamics are out of reach in float32. Importing jaxmbd
therefore enables ``jax_enable_x64``.
"""

import jax

jax.config.update("jax_enable_x64", True)
