"""Visual geometry: shapes in the model, schema, builder, defaults and the paper examples."""

import json

import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd import geometry as G


def _random_inertia(rng):
    while True:
        w = rng.uniform(0.1, 2.0, 3)
        if 2 * w.max() < w.sum():  # physical (triangle inequality)
            break
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return Q @ np.diag(w) @ Q.T


def test_equivalent_box_has_the_body_inertia():
    rng = np.random.default_rng(0)
    for _ in range(5):
        J, m = _random_inertia(rng), rng.uniform(0.5, 3.0)
        shape = G.equivalent_box(m, J)
        vol, c, J_box = G.mass_properties(shape, m)
        np.testing.assert_allclose(J_box, J, rtol=0, atol=ROUND_OFF * np.abs(J).max())
        np.testing.assert_allclose(c, 0.0, rtol=0, atol=ROUND_OFF)
        assert np.linalg.det(shape.A) == pytest.approx(1.0, rel=ROUND_OFF, abs=0)


def test_primitive_mass_properties_closed_forms():
    m = 2.0
    _, c, J = G.mass_properties(G.cone(1.0, 2.0), m, resolution=256)
    np.testing.assert_allclose(c, [0, 0, 0.5], rtol=0, atol=ROUND_OFF)  # H / 4 above the base
    np.testing.assert_allclose(np.diag(J), [0.6, 0.6, 0.6], rtol=5e-4)  # 3m/80(4R^2+H^2)
    _, _, J = G.mass_properties(G.cylinder(3.0, 6.0, inner_radius=2.0), m, resolution=256)
    np.testing.assert_allclose(np.diag(J), [m * (39 + 36) / 12] * 2 + [m * 13 / 2], rtol=5e-4)
    _, c, J = G.mass_properties(G.pyramid((2.0, 2.0), 3.0), m)
    np.testing.assert_allclose(c, [0, 0, 0.75], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(np.diag(J), [1.075, 1.075, 0.8], rtol=ROUND_OFF)
    vol, _, J = G.mass_properties(G.sphere(1.0), m, resolution=256)
    assert vol == pytest.approx(4 / 3 * np.pi, rel=2e-3)
    vol, _, _ = G.mass_properties(G.capsule(1.0, 2.0), m, resolution=256)
    assert vol == pytest.approx(4 / 3 * np.pi + 2 * np.pi, rel=7e-4)  # 1.6e-4


PAPER_MODELS = [
    "single_pendulum",
    "double_pendulum",
    "gyro_top",
    "cylindrical_pair",
    "planar_pair",
    "six_body_linkage",
    "bar_double_pendulum",
    "spherical_double_pendulum",
    "floating_pair",
    "spherical_three_bar",
    "heavy_top",
]


@pytest.mark.parametrize("name", PAPER_MODELS)
def test_paper_shapes_are_the_bodies(name):
    """Each paper body's own (first) shape, as a homogeneous solid of the body's mass, has
    the body's centre of mass and inertia: the shapes are the real ones, not decoration."""
    model = getattr(mbd.models, name)()
    assert len(model.shapes) == model.nb
    for b in range(model.nb):
        shape = model.shapes[b][0]
        _, c, J = G.mass_properties(shape, float(model.mass[b]), resolution=512)
        Jm = np.asarray(model.inertia[b])
        scale = np.abs(Jm).max()
        np.testing.assert_allclose(
            c, 0.0, rtol=0, atol=ROUND_OFF * max(1.0, np.ptp(shape.mesh()[0]))
        )
        np.testing.assert_allclose(J / scale, Jm / scale, atol=2e-4, err_msg=f"{name} body {b}")


def test_builtin_files_carry_builder_shapes():
    from jaxmbd.models import mueller_terze as mt

    for name, build in mt.BUILDERS.items():
        assert getattr(mbd.models, name)().shapes == build().shapes != ()


def test_shapes_round_trip_and_default(tmp_path):
    b = mbd.ModelBuilder(name="shapes")
    b.add_body(
        "a",
        mass=1.0,
        inertia=[1, 2, 2.5],
        shapes=[
            {"type": "capsule", "radius": 0.1, "length": 1.0, "axis": [1, 1, 0], "color": "red"},
            G.mesh([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], [[0, 2, 1], [0, 1, 3]]),
        ],
    )
    b.add_body("b", mass=1.0, inertia=[1, 1, 1], r=(1, 0, 0))
    model = b.build()
    path = mbd.save_model(model, tmp_path / "m.json")
    back = mbd.load_model(path)
    assert back.shapes == model.shapes
    assert back.shapes[1] == ()
    (box,) = G.body_shapes(back, 1)
    assert box.kind == "box"
    np.testing.assert_allclose(box.param("size"), [np.sqrt(6)] * 3, rtol=ROUND_OFF)
    assert json.loads(path.read_text())["bodies"][0]["shapes"][0]["color"] == "red"


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ({"type": "torus", "radius": 1}, "shapes[0].type: unknown shape type 'torus'"),
        ({"type": "box"}, "shapes[0].size: missing required field"),
        ({"type": "box", "size": [1, -1, 1]}, "shapes[0].size: sizes must be positive"),
        ({"type": "sphere", "radius": 1, "length": 2}, "unknown field(s) ['length']"),
        ({"type": "cylinder", "radius": 1, "length": 1, "inner_radius": 2}, "inner_radius"),
        ({"type": "sphere", "radius": 1, "A": [[1, 0], [0, 1]]}, "shapes[0].A"),
        ({"type": "cone", "radius": 1, "length": 1, "axis": [0, 0, 0]}, "shapes[0].axis"),
        ({"type": "mesh", "vertices": [[0, 0, 0]] * 3, "faces": [[0, 1, 3]]}, "out of range"),
    ],
)
def test_bad_shapes_name_file_body_and_field(tmp_path, shape, message):
    doc = {
        "format": "jaxmbd-model",
        "bodies": [{"name": "link", "mass": 1, "inertia": [1, 1, 1], "shapes": [shape]}],
    }
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(mbd.ModelFileError) as err:
        mbd.load_model(path)
    text = str(err.value)
    assert str(path) in text and "'link'" in text and message in text


# ----------------------------------------------------------------------------- default look


def test_joint_points_prefer_the_coincident_points():
    """Slider crank: the rod's ends are the ball joint's CD point and the revolute-cylindrical
    pair's DP2 point (not its D row's construction point 1 m away on the slider); the ground
    holds the crank's pivot and the slider's reference point, in global coordinates."""
    model = mbd.models.slider_crank()
    got = {(p.joint, model.body_label(p.body)): (p.point.tolist(), p.kind)
           for p in G.joint_points(model)}  # fmt: skip
    assert got == {
        ("rev_A", "ground"): ([0.0, 0.1, 0.12], "CD"),
        ("rev_A", "crank"): ([0.0, 0.0, 0.0], "CD"),
        ("sphere_B", "rod"): ([-0.15, 0.0, 0.0], "CD"),
        ("sphere_B", "crank"): ([0.0, 0.08, 0.0], "CD"),
        ("rev_cyl_C", "rod"): ([0.15, 0.0, 0.0], "DP2"),
        ("rev_cyl_C", "slider"): ([0.0, 0.0, 0.0], "DP2"),
        ("trans_D", "slider"): ([0.0, 0.0, 0.0], "DP2"),
        ("trans_D", "ground"): ([0.2, 0.0, 0.0], "DP2"),
    }
    (slide,) = G.ground_slides(model)
    assert (slide.joint, model.body_names[slide.body]) == ("trans_D", "slider")
    np.testing.assert_allclose(np.abs(slide.axis), [1, 0, 0], rtol=0, atol=ROUND_OFF)
    np.testing.assert_allclose(slide.origin, [0.2, 0, 0], rtol=0, atol=ROUND_OFF)
    assert G.ground_slides(mbd.models.cylindrical_pair()) == []  # a pair of two bodies


def _distance_to_segment(V, a, b):
    t = np.clip((V - a) @ (b - a) / ((b - a) @ (b - a)), 0.0, 1.0)
    return np.linalg.norm(V - (a + t[:, None] * (b - a)), axis=1)


def test_stick_figure_capsules_join_the_centre_of_mass_and_the_points():
    """Every vertex of each capsule lies at the radius from its segment: a rod's two ends on
    either side of the centre of mass give one capsule from end to end, another point its own
    capsule from the centre of mass; points at the centre or repeated give none."""
    radius = 0.05
    ends = [np.array([-1.0, 0, 0]), np.array([2.0, 0, 0]), np.array([0.0, 0.5, 0.5])]
    shapes = G.stick_figure([ends[0], ends[1], ends[2], ends[1], np.zeros(3)], radius)
    assert [s.kind for s in shapes] == ["capsule", "capsule"]
    for shape, (a, b) in zip(shapes, [(ends[1], ends[0]), (np.zeros(3), ends[2])], strict=True):
        V, _ = shape.mesh(16)
        np.testing.assert_allclose(_distance_to_segment(V, a, b), radius, rtol=ROUND_OFF)
        assert shape.param("radius") == radius
        np.testing.assert_allclose(shape.param("length"), np.linalg.norm(b - a), rtol=ROUND_OFF)


def test_default_shapes_of_the_builtin_mechanisms():
    """Slider crank: crank and rod are single capsules, thin against their links, the slider
    (all its joint points at its centre of mass) is its box of equal inertia, at least two
    radii wide. Spinning top: a capsule to the pivot and a bob at most half the link long.
    The ground: an anchor at the crank's pivot and the slider's rail."""
    model = mbd.models.slider_crank()
    crank, rod, slider = G.default_shapes(model)
    radius = G.stick_radius(model)
    assert 0.01 * 0.3 < radius < 0.1 * 0.08  # thin against the crank (0.08) and rod (0.3)
    assert [s.kind for s in crank] == ["capsule"] and [s.kind for s in rod] == ["capsule"]
    np.testing.assert_allclose(rod[0].param("length"), 0.3, rtol=ROUND_OFF)
    (block,) = slider
    box = G.equivalent_box(2.0, [1e-4] * 3)
    np.testing.assert_allclose(
        block.param("size"), np.maximum(box.param("size"), 2 * radius), rtol=ROUND_OFF
    )
    assert model.shapes == () and G.body_shapes(model, 1) == rod
    kinds = sorted(s.kind for s in G.ground_shapes(model))
    assert kinds == ["box", "capsule"]

    top = mbd.models.spinning_top()
    stick, bob = G.default_shapes(top)[0]
    link = np.linalg.norm([0.1, 0.05, 0.2])
    assert stick.kind == "capsule" and np.isclose(
        stick.param("length"), link, rtol=ROUND_OFF, atol=0
    )
    assert bob.kind == "box" and max(bob.param("size")) <= 0.5 * link + 1e-12
