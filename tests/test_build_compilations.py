"""Building a model is host-side work: loading an MJCF file compiles no JAX program of its
own. Its numbers become the model's arrays by plain copies, and the joint coordinates of
its initial state go through one compiled program per joint kind and sign, shared by every
model: a second file with other sizes (bodies, contact pairs, actuators, sensors) but the
same kinds of joints compiles nothing."""

import warnings

from conftest import count_compilations

import jaxmbd as mbd


def _chain(n: int) -> str:
    """A cart on a slide carrying a chain of ``n`` hinged capsules over a floor, each hinge
    limited, driven by a motor and measured by a sensor."""
    links, close = [], []
    for k in range(n):
        links.append(
            f'<body name="link{k}" pos="0 0 {-0.3 if k else 0}">'
            f'<joint name="hinge{k}" type="hinge" axis="0 1 0" range="-{1 + k / 10} 1" '
            'limited="true"/>'
            '<geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.04"/>'
        )
        close.append("</body>")
    motors = "".join(f'<motor joint="hinge{k}" gear="{k + 1}"/>' for k in range(n))
    sensors = "".join(f'<jointpos joint="hinge{k}"/>' for k in range(n))
    return f"""<mujoco><worldbody>
      <geom type="plane" size="3 3 0.1"/>
      <body name="cart" pos="0 0 {0.4 * n + 0.5}">
        <joint name="slide" type="slide" axis="1 0 0"/>
        <geom type="box" size="0.2 0.1 0.05"/>
        {"".join(links)}{"".join(close)}
      </body></worldbody>
      <actuator>{motors}</actuator><sensor>{sensors}</sensor></mujoco>"""


def test_a_second_file_of_the_same_joint_kinds_compiles_nothing(tmp_path):
    first, second = tmp_path / "three.xml", tmp_path / "six.xml"
    first.write_text(_chain(3))
    second.write_text(_chain(6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with count_compilations() as counts:
            small = mbd.load_model(first)
        # the joint-coordinate programs of its two kinds, and conversions of Python numbers
        assert counts["compile"] <= 4, counts
        with count_compilations() as counts:
            large = mbd.load_model(second)
    assert counts == {"trace": 0, "compile": 0}
    assert (small.nb, large.nb) == (4, 7)
    assert len(large.contacts.pairs) > len(small.contacts.pairs)
