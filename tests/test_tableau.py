"""Butcher tableaus: the named ones satisfy their order conditions; bad tables are refused."""

import numpy as np
import pytest

from jaxmbd.integrators import TABLEAUS, get_tableau


def order_conditions(a, b, c):
    """Residuals of the rooted-tree order conditions up to order 4, grouped by order."""
    return {
        1: [b.sum() - 1],
        2: [b @ c - 1 / 2],
        3: [b @ c**2 - 1 / 3, b @ a @ c - 1 / 6],
        4: [
            b @ c**3 - 1 / 4,
            b @ (c * (a @ c)) - 1 / 8,
            b @ a @ c**2 - 1 / 12,
            b @ a @ a @ c - 1 / 24,
        ],
    }


@pytest.mark.parametrize("name", TABLEAUS)
def test_named_tableaus_have_their_order(name):
    tab = get_tableau(name)
    a, b, c = (np.asarray(x) for x in (tab.a, tab.b, tab.c))
    conditions = order_conditions(a, b, c)
    for p in range(1, tab.order + 1):
        np.testing.assert_allclose(conditions[p], 0.0, atol=1e-15)
    if tab.order < 4:  # and not one order more
        assert np.max(np.abs(conditions[tab.order + 1])) > 1e-3


def test_user_tableau_and_errors():
    tab = get_tableau(([[0, 0], [2 / 3, 0]], [1 / 4, 3 / 4], [0, 2 / 3]))  # Ralston
    assert tab.stages == 2 and tab.name == "user"
    with pytest.raises(ValueError, match="unknown tableau 'rk5'"):
        get_tableau("rk5")
    with pytest.raises(ValueError, match="not explicit"):
        get_tableau(([[0.5, 0], [0.5, 0.5]], [0.5, 0.5], [0.5, 1.0]))
    with pytest.raises(ValueError, match="row sums"):
        get_tableau(([[0, 0], [1, 0]], [0.5, 0.5], [0, 0.5]))
    with pytest.raises(ValueError, match="sum to 1"):
        get_tableau(([[0, 0], [1, 0]], [0.5, 0.4], [0, 1]))
    with pytest.raises(ValueError, match="shapes"):
        get_tableau(([[0, 0]], [0.5, 0.5], [0, 1]))
    with pytest.raises(ValueError, match="lacks key"):
        get_tableau({"a": [[0]], "b": [1]})
