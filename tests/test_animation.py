"""3-D animation: GIF / MP4 frames, the offline HTML export in a real headless browser, CLI."""

import colorsys
import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image
from tolerances import ROUND_OFF
from typer.testing import CliRunner

import jaxmbd as mbd
from jaxmbd.cli import app
from jaxmbd.lie import so3_exp
from jaxmbd.viz.animation import _COLORS, _scene


def _two_body_model():
    b = mbd.ModelBuilder(name="two bodies", gravity=(0, 0, 0))
    b.add_body("bar", mass=1.0, inertia=[0.01, 0.34, 0.34], r=(1.0, 0, 0))
    b.add_body("disc", mass=1.0, inertia=[0.05, 0.05, 0.1], r=(2.5, 0, 0), shapes=[
        mbd.geometry.cylinder(0.4, 0.2, axis=(1, 0, 0))])  # fmt: skip
    b.revolute("hinge", body_i="ground", body_j="bar", point=(0, 0, 0), axis=(0, 0, 1))
    b.spherical("ball", body_i="bar", body_j="disc", point=(2.0, 0, 0))
    return b.build()


def _rigid_motion(model, n=41, t_end=2.0):
    """A Solution in which the whole model turns about z by 90 degrees (no simulation)."""
    t = np.linspace(0.0, t_end, n)
    R = np.stack([np.asarray(so3_exp(np.array([0.0, 0.0, 0.5 * np.pi * s / t_end]))) for s in t])
    r = np.einsum("tij,bj->tbi", R, np.asarray(model.r0))
    A = np.einsum("tij,bjk->tbik", R, np.asarray(model.A0))
    return _solution(model, t, r, A)


def _solution(model, t, r, A, contact_element=None):
    """A Solution with positions ``r`` (n, nb, 3) and rotations ``A`` (n, nb, 3, 3), at
    rest, with the run's ``contact_element`` (for ``sol.contact``) if given."""
    n = len(t)
    z = np.zeros_like(r)
    return mbd.Solution(
        t=t, r=r, A=A, rdot=z, omega=z, rddot=z, omegadot=z, lam=np.zeros((n, model.nc)),
        iterations=np.zeros(n, int), status=np.zeros(n, int), residual=np.zeros(n),
        body_names=model.body_names, constraint_names=model.constraint_names,
        contact_element=contact_element,
    )  # fmt: skip


def _hue_pixels(rgb: np.ndarray, color: str) -> int:
    """Pixels whose hue is that of ``color`` (shading scales RGB, keeping the hue)."""
    from matplotlib.colors import to_rgb

    target = colorsys.rgb_to_hsv(*to_rgb(color))[0]
    arr = rgb.reshape(-1, 3).astype(float) / 255.0
    mx, mn = arr.max(1), arr.min(1)
    sat = (mx - mn) / np.maximum(mx, 1e-9)
    hsv = np.array([colorsys.rgb_to_hsv(*p)[0] for p in arr[(sat > 0.35) & (mx > 0.15)]])
    if hsv.size == 0:
        return 0
    d = np.abs(hsv - target)
    return int(np.sum(np.minimum(d, 1 - d) < 0.04))


def test_gif_frames_differ_and_show_every_body(tmp_path):
    model = _two_body_model()
    sol = _rigid_motion(model)
    path = mbd.plot.animate(
        model, sol, tmp_path / "a.gif", fps=5, traces=["disc"], size=(400, 300), max_frames=6
    )
    im = Image.open(path)
    assert im.n_frames == 6
    frames = []
    for k in (0, im.n_frames - 1):
        im.seek(k)
        frames.append(np.asarray(im.convert("RGB")))
    assert np.mean(np.any(frames[0] != frames[1], axis=-1)) > 0.01  # the bodies moved
    for rgb in frames:
        for b in range(model.nb):
            assert _hue_pixels(rgb, _COLORS[b]) > 150, f"body {model.body_names[b]} not drawn"


def test_mp4_written_or_clear_error(tmp_path, monkeypatch):
    model = _two_body_model()
    sol = _rigid_motion(model, n=11)
    if shutil.which("ffmpeg") or _has_imageio_ffmpeg():
        path = mbd.plot.animate(model, sol, tmp_path / "a.mp4", fps=10, size=(320, 240))
        assert path.read_bytes()[4:8] == b"ftyp" and path.stat().st_size > 2000
    # without any ffmpeg: a clear error, not a crash inside matplotlib
    monkeypatch.setattr(shutil, "which", lambda *_: None)
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)
    with pytest.raises(RuntimeError, match="needs ffmpeg"):
        mbd.plot.animate(model, sol, tmp_path / "b.mp4")


def _has_imageio_ffmpeg():
    try:
        import imageio_ffmpeg

        imageio_ffmpeg.get_ffmpeg_exe()
        return True
    except (ImportError, RuntimeError):
        return False


def test_bad_arguments():
    model = _two_body_model()
    sol = _rigid_motion(model, n=3)
    with pytest.raises(ValueError, match="unknown output format"):
        mbd.plot.animate(model, sol, "x.avi")
    with pytest.raises(ValueError, match="unknown body 'nope'"):
        mbd.plot.animate(model, sol, "x.gif", traces=["nope"])
    with pytest.raises(ValueError, match="not the model's"):
        mbd.plot.animate(mbd.models.double_pendulum(), sol, "x.gif")


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


BLINK_RESOURCE_LOADER = 101845102  # Chromium's traffic annotation of a page's own loads


def _page_requests(browser, page, tmp_path, screenshot=None) -> list[str]:
    """Open ``page`` in headless Chromium with the network closed (every http(s) request
    goes to a dead proxy and is logged); return the network URLs the page asked for."""
    netlog = tmp_path / f"{page.stem}.netlog.json"
    if screenshot:
        shot = [f"--screenshot={screenshot}", "--virtual-time-budget=8000"]
    else:
        shot = ["--dump-dom", "--virtual-time-budget=2000"]
    subprocess.run(
        [
            browser, "--headless=new", "--no-sandbox", "--disable-gpu",
            "--enable-unsafe-swiftshader", "--use-angle=swiftshader",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", "--disable-extensions", f"--user-data-dir={tmp_path / 'profile'}",
            "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
            f"--log-net-log={netlog}", "--window-size=700,520", *shot, page.as_uri(),
        ],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    pattern = rf'"traffic_annotation":{BLINK_RESOURCE_LOADER},"url":"([^"]+)"'
    urls = dict.fromkeys(re.findall(pattern, netlog.read_text()))
    return [u for u in urls if not u.startswith(("file:", "data:", "blob:"))]


def test_html_is_offline_holds_the_trajectory_and_renders(tmp_path):
    pytest.importorskip("plotly")
    model = _two_body_model()
    sol = _rigid_motion(model)
    path = mbd.plot.animate(model, sol, tmp_path / "a.html", fps=10, traces=[("bar", (1, 0, 0))])
    html = path.read_text()
    # the document itself loads nothing: no src/href to a network address outside the
    # inlined plotly.js (whose source holds map-tile URLs it never requests for 3-D scenes)
    markup = re.sub(r"<script[^>]*>.*?</script>", "", html, flags=re.S)
    assert not re.search(r"https?://", markup)
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)\s*=", html)
    data = json.loads(
        re.search(r'id="jaxmbd-trajectory">(.*?)</script>', html, flags=re.S).group(1)
    )
    assert data["bodies"] == list(model.body_names)
    idx = np.searchsorted(np.asarray(sol.t), np.asarray(data["t"]) - 1e-12)
    assert len(idx) == 21
    np.testing.assert_array_equal(np.asarray(data["r"]), np.asarray(sol.r)[idx])

    browser = _chromium()
    if browser is None:
        if __import__("os").environ.get("CI"):
            pytest.fail("CI must have chromium (.ci/run installs it)")
        pytest.skip("no chromium on this machine")
    shot = tmp_path / "shot.png"
    assert _page_requests(browser, path, tmp_path, screenshot=shot) == []
    # the check can fail: a page that loads a script from the network is caught
    bad = tmp_path / "bad.html"
    bad.write_text('<html><head><script src="https://cdn.plot.ly/x.js"></script></head></html>')
    assert _page_requests(browser, bad, tmp_path) == ["https://cdn.plot.ly/x.js"]
    rgb = np.asarray(Image.open(shot).convert("RGB"))
    for b in range(model.nb):
        assert _hue_pixels(rgb, _COLORS[b]) > 150, f"body {model.body_names[b]} not rendered"


def test_cli_animate_npz_and_simulate_animate(tmp_path, monkeypatch):
    model = _two_body_model()
    mbd.save_model(model, tmp_path / "m.json")
    _rigid_motion(model, n=11).save(tmp_path / "run.npz")
    runner = CliRunner()
    gif = tmp_path / "a.gif"
    args = ["animate", str(tmp_path / "run.npz"), "--model", str(tmp_path / "m.json")]
    result = runner.invoke(app, [*args, "--out", str(gif), "--trace", "disc"])
    assert result.exit_code == 0, result.output
    assert Image.open(gif).n_frames == 11
    result = runner.invoke(app, ["animate", str(tmp_path / "run.npz"), "--out", str(gif)])
    assert result.exit_code != 0 and "--model" in result.output
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "a.avi")])
    assert result.exit_code != 0 and "unknown format" in result.output
    # simulate --animate: the simulation itself is tested elsewhere (and costs a compile)
    calls = []

    def fake_simulate(m, **options):
        calls.append(options)
        return _rigid_motion(m, n=6, t_end=0.2)

    monkeypatch.setattr("jaxmbd.cli.run_simulate", fake_simulate)
    out = tmp_path / "sp.gif"
    result = runner.invoke(
        app, ["simulate", str(tmp_path / "m.json"), "--t-end", "0.2", "--animate", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert calls[0]["t_end"] == 0.2 and Image.open(out).n_frames == 6
    result = runner.invoke(app, ["animate", str(tmp_path / "m.json"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    # a file's formulation is simulate's default for it (rA for a JSON model)
    assert calls[1]["formulation"] is None and "animation:" in result.output


# ----------------------------------------------------------------------------- default look

# every built-in model (the shipped files and the code-built ones), generated ones small
SMALL = {"pendulum_chain": 3, "engine": 2, "binary_tree": 4}
BUILT_IN = list(dict.fromkeys([*mbd.models.BUILTIN, "cylindrical_pair", "gyro_top", "planar_pair",
                               "six_body_linkage", "bar_double_pendulum", *SMALL]))  # fmt: skip


def _built_in(name):
    build = getattr(mbd.models, name)
    return build(SMALL[name]) if name in SMALL else build()


def _distance_to_surface(p: np.ndarray, tri: np.ndarray) -> float:
    """Distance from point ``p`` to the triangles ``tri`` (k, 3, 3)."""
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    n = np.cross(b - a, c - a)
    n = n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
    height = np.einsum("ij,ij->i", p - a, n)
    foot = p - height[:, None] * n
    inside = np.all(
        [
            np.einsum("ij,ij->i", np.cross(v - u, foot - u), n) >= 0
            for u, v in ((a, b), (b, c), (c, a))
        ],
        axis=0,
    )
    best = np.min(np.abs(height[inside]), initial=np.inf)
    for u, v in ((a, b), (b, c), (c, a)):
        t = np.clip(np.einsum("ij,ij->i", p - u, v - u) / np.einsum("ij,ij->i", v - u, v - u), 0, 1)
        best = min(best, float(np.linalg.norm(p - (u + t[:, None] * (v - u)), axis=1).min()))
    return best


def _winding_number(p: np.ndarray, tri: np.ndarray) -> float:
    """How many times the closed triangle meshes ``tri`` wind around ``p`` (Van Oosterom
    and Strackee's solid angle of each triangle, summed, over 4 pi): >= 1 inside."""
    a, b, c = tri[:, 0] - p, tri[:, 1] - p, tri[:, 2] - p
    la, lb, lc = (np.linalg.norm(v, axis=1) for v in (a, b, c))
    det = np.einsum("ij,ij->i", a, np.cross(b, c))
    dot = lambda u, v: np.einsum("ij,ij->i", u, v)  # noqa: E731
    den = la * lb * lc + dot(a, b) * lc + dot(b, c) * la + dot(c, a) * lb
    return abs(float(np.sum(2.0 * np.arctan2(det, den)))) / (4.0 * np.pi)


def _expected_joint_points(model) -> list[tuple[int, np.ndarray, str]]:
    """(body, body-frame point, what) read straight from the constraints: the points that
    CD rows make coincide (every body), and DP2 rows' points of bodies drawn by default
    (with its own shapes, a body sliding on a pair may be far from the pair's point)."""
    default = [not (model.shapes and model.shapes[b]) for b in range(model.nb)]
    out = []
    for gset in model.gcons:
        if gset.kind not in ("CD", "DP2"):
            continue
        for k, row in enumerate(gset.rows):
            for body, point in (
                (gset.body_i[k], gset.s_bar_p_i[k]),
                (gset.body_j[k], gset.s_bar_q_j[k]),
            ):
                if body < model.nb and (gset.kind == "CD" or default[body]):
                    out.append((body, np.asarray(point), f"{model.constraint_names[row]}"))
    return out + [(b, np.zeros(3), "centre of mass") for b in range(model.nb) if default[b]]


@pytest.mark.parametrize("name", BUILT_IN)
def test_first_frame_bodies_touch_their_joint_points(name):
    """Every body's drawn geometry (its own shapes, or the default stick figure) in the
    first frame contains or touches each of its joint points, in world coordinates."""
    model = _built_in(name)
    sol = _rigid_motion(model, n=2, t_end=1e-9)  # the initial configuration
    scene = _scene(model, sol, fps=1, speed=1, max_frames=1, traces=None, resolution=16)
    size = float(np.ptp(np.concatenate([v[0] for v in scene.verts]), axis=0).max())
    expected = _expected_joint_points(model)
    default = [b for b in range(model.nb) if not (model.shapes and model.shapes[b])]
    linked = {b for b, _, what in expected if what != "centre of mass"}
    assert linked >= set(default), f"{name}: a body drawn by default has no joint point"
    r0, A0 = np.asarray(model.r0), np.asarray(model.A0)
    for body, point, what in expected:
        world = r0[body] + A0[body] @ point
        tri = scene.verts[body][0][scene.faces[body]]
        inside = _winding_number(world, tri) > 0.5
        gap = 0.0 if inside else _distance_to_surface(world, tri)
        assert gap <= ROUND_OFF * size, (
            f"{name}: body {model.body_names[body]!r} is drawn {gap:.3g} away from its point "
            f"{point.tolist()} ({what})"
        )


def test_default_look_is_drawn_in_every_body_colour(tmp_path):
    """The first frame of the slider crank as rendered: each body, drawn as its stick figure
    or block, shows in its colour."""
    model = mbd.models.slider_crank()
    path = mbd.plot.animate(model, _rigid_motion(model, n=2, t_end=1e-9), tmp_path / "a.gif",
                            max_frames=1, size=(480, 360))  # fmt: skip
    rgb = np.asarray(Image.open(path).convert("RGB"))
    for b in range(model.nb):
        assert _hue_pixels(rgb, _COLORS[b]) > 40, f"body {model.body_names[b]} not drawn"


def test_ground_anchor_and_rail_hold_the_ground_points():
    """The ground is drawn where bodies attach to it: an anchor at the crank's pivot, and a
    rail under the slider at every frame while it slides along global x (the motion here is
    made up: only the slider moves, by -0.05 to 0.1)."""
    model = mbd.models.slider_crank()
    n = 7
    t = np.linspace(0.0, 1.0, n)
    slider = model.body_names.index("slider")
    r = np.broadcast_to(np.asarray(model.r0), (n, model.nb, 3)).copy()
    r[:, slider, 0] += np.linspace(-0.05, 0.1, n)
    sol = _solution(model, t, r, np.broadcast_to(np.asarray(model.A0), (n, model.nb, 3, 3)))
    scene = _scene(model, sol, fps=6, speed=1, max_frames=n, traces=None, resolution=16)
    assert scene.names[-1] == "ground" and len(scene.verts) == model.nb + 1
    tri = scene.verts[-1][0][scene.faces[-1]]
    assert len(scene.t) == n
    for k in range(n):
        assert _winding_number(r[k, slider], tri) > 0.5, f"slider off its rail at t = {t[k]}"
    assert _winding_number(np.array([0.0, 0.1, 0.12]), tri) > 0.5  # the crank's pivot
    assert _winding_number(np.array([0.0, 0.1, 0.3]), tri) < 0.5  # nothing else


# ----------------------------------------------------------------------------- contact

# a ball of radius R on the plane z = H, pressed in by delta(t) = 0.01 - 0.03 sin(pi t) (the
# gap is -delta) while it moves along x; made up, with zero velocities, so that each slot's
# force is K delta^1.5 along +z exactly (Hunt–Crossley without a rate) at the midway point
R, H, K = 0.05, 0.1, 1e5
T_BALL = np.linspace(0.0, 2.0, 11)
DELTA = 0.01 - 0.03 * np.sin(np.pi * T_BALL)
X_BALL = 0.3 * T_BALL


def _ball_on_plane():
    b = mbd.ModelBuilder(name="ball", gravity=(0, 0, -9.81))
    b.add_body("ball", mass=1.0, inertia=[1e-3] * 3, r=(0, 0, 0.5),
               shapes=[mbd.geometry.sphere(R)])  # fmt: skip
    b.add_ground_plane(point=(0.2, -0.1, H), normal=(0, 0, 1))
    b.add_contact("ball", "ground", friction=0.5, stiffness=K, restitution=0.5)
    return b.build()


def _ball_run(model, contact_element=None):
    n = len(T_BALL)
    r = np.zeros((n, 1, 3))
    r[:, 0, 0], r[:, 0, 2] = X_BALL, H + R - DELTA
    A = np.broadcast_to(np.eye(3), (n, 1, 3, 3))
    return _solution(model, T_BALL, r, A, contact_element)


@pytest.fixture(scope="module")
def ball():
    """(model, Solution carrying its contact element) of the made-up bounce."""
    from jaxmbd.contact import with_contact

    model = _ball_on_plane()
    return model, _ball_run(model, with_contact(model, "compliant").contacts)


def _ball_scene(model, sol, **options):
    return _scene(model, sol, fps=5, speed=1, max_frames=50, traces=None, resolution=16,
                  **options)  # fmt: skip


def test_ground_plane_patch_at_the_plane_covers_the_travel(ball):
    """The plane is drawn in the plane z = H, as the rectangle around the ball's travel
    (x from -R to 0.6 + R, y within +-R) with a quarter of the scene's size to spare."""
    model, sol = ball
    scene = _ball_scene(model, sol, contacts=False)
    assert len(scene.t) == len(T_BALL) and scene.contacts is None
    # the scene's size: the ball's box over the run, 0.6 + 2 R along x
    assert scene.size == pytest.approx(0.6 + 2 * R, rel=ROUND_OFF)
    (patch,) = scene.planes
    np.testing.assert_allclose(patch.verts[:, 2], H, rtol=ROUND_OFF)
    np.testing.assert_allclose(patch.normal, [0, 0, 1], rtol=0, atol=ROUND_OFF)
    margin = 0.25 * scene.size
    np.testing.assert_allclose(patch.verts.min(0)[:2], [-R - margin, -R - margin], rtol=ROUND_OFF)
    np.testing.assert_allclose(
        patch.verts.max(0)[:2], [0.6 + R + margin, R + margin], rtol=ROUND_OFF
    )
    # a checkerboard: two shades, as many squares of each (to one)
    shades = np.unique(patch.colors[:, 0])
    assert len(shades) == 2
    assert (
        abs(np.sum(patch.colors[:, 0] == shades[0]) - np.sum(patch.colors[:, 0] == shades[1])) <= 2
    )
    assert np.all(scene.lo <= patch.verts.min(0)) and np.all(scene.hi >= patch.verts.max(0))


def test_tilted_plane_and_ground_shapes_drawn():
    """A tilted plane's patch lies in the plane and holds the projection of every drawn body
    point; a plane of given size is that square about its point; a box fixed to the ground
    is drawn at its global pose, as a body shape is."""
    n_hat = np.array([0.0, np.sin(0.3), np.cos(0.3)])
    b = mbd.ModelBuilder(name="two planes", gravity=(0, 0, -9.81))
    b.add_body("ball", mass=1.0, inertia=[1e-3] * 3, r=(0, 0, 0.5), shapes=[mbd.geometry.sphere(R)])
    b.add_ground_plane(point=(0.0, 0.0, H), normal=tuple(n_hat))
    b.add_ground_plane(point=(1.0, 0.0, 0.0), normal=(-1, 0, 0), size=(0.4, 0.2))
    b.add_ground_shape(mbd.geometry.box((0.2, 0.2, 0.2), pos=(0.5, 0.5, 0.1)))
    model = b.build()
    sol = _rigid_motion(model, n=5)  # turning about z: the ball sweeps a quarter circle
    scene = _ball_scene(model, sol)
    assert scene.contacts is None  # no contact pairs, no contact slots
    tilted, wall = scene.planes
    np.testing.assert_allclose((tilted.verts - [0, 0, H]) @ n_hat, 0.0, rtol=0, atol=ROUND_OFF)
    # every body vertex projects inside the patch (a rectangle in the plane's own axes)
    Rp = model.ground_shapes[0].A
    local = lambda p: ((p - [0, 0, H]) @ Rp)[:, :2]  # noqa: E731
    body = local(np.concatenate([v.reshape(-1, 3) for v in scene.verts[: model.nb]]))
    lo, hi = local(tilted.verts).min(0), local(tilted.verts).max(0)
    assert np.all(body.min(0) >= lo + 0.25 * scene.size - 1e-12)
    assert np.all(body.max(0) <= hi - 0.25 * scene.size + 1e-12)
    np.testing.assert_allclose(wall.verts[:, 0], 1.0, rtol=ROUND_OFF)
    # 0.4 by 0.2 (along the plane's own axes) about its point
    np.testing.assert_allclose(
        np.sort(np.ptp(wall.verts[:, 1:], axis=0)), [0.2, 0.4], rtol=ROUND_OFF
    )
    np.testing.assert_allclose(
        0.5 * (wall.verts.min(0) + wall.verts.max(0)), [1, 0, 0], rtol=0, atol=ROUND_OFF
    )
    assert scene.names[-1] == "ground"
    tri = scene.verts[-1][0][scene.faces[-1]]
    assert _winding_number(np.array([0.5, 0.5, 0.1]), tri) > 0.5  # the box's centre
    assert _winding_number(np.array([0.5, 0.5, 0.25]), tri) < 0.5  # above it: outside


def test_contact_arrows_at_active_frames_along_the_force(ball):
    """Points and arrows at exactly the frames where the ball penetrates; each arrow from
    the midway point (x, 0, H - delta/2) along +z, K delta^1.5 * scale long, the largest
    a quarter of the scene's size."""
    model, sol = ball
    scene = _ball_scene(model, sol)
    c = scene.contacts
    assert c is not None and c.active.shape == (len(T_BALL), 1)
    np.testing.assert_array_equal(c.active[:, 0], DELTA > 0)
    force = K * np.clip(DELTA, 0, None) ** 1.5
    assert c.largest == pytest.approx(force.max(), rel=ROUND_OFF)
    assert c.scale == pytest.approx(0.25 * scene.size / force.max(), rel=ROUND_OFF)
    on = DELTA > 0
    expected_point = np.stack([X_BALL, 0 * X_BALL, H - DELTA / 2], axis=1)
    np.testing.assert_allclose(c.point[on, 0], expected_point[on], rtol=0, atol=ROUND_OFF)
    expected_arrow = np.zeros((len(T_BALL), 3))
    expected_arrow[:, 2] = c.scale * force
    np.testing.assert_allclose(c.arrow[:, 0], expected_arrow, rtol=ROUND_OFF, atol=1e-15)
    assert np.max(np.linalg.norm(c.arrow, axis=-1)) == pytest.approx(
        0.25 * scene.size, rel=ROUND_OFF
    )
    # the polyline drawn: shaft from the point to its tip, then a head ending at the tip
    from jaxmbd.viz.animation import _arrow_polyline

    k = int(np.argmax(force))
    seg = _arrow_polyline(c.point[k], c.arrow[k], np.array([1.0, 0, 0]))
    np.testing.assert_array_equal(seg[0], c.point[k, 0])
    np.testing.assert_array_equal(seg[1], seg[4])
    np.testing.assert_array_equal(seg[1], c.point[k, 0] + c.arrow[k, 0])
    barbs = seg[[3, 5]] - seg[4]
    np.testing.assert_allclose(
        np.linalg.norm(barbs, axis=1), 0.25 * 0.25 * scene.size, rtol=ROUND_OFF
    )
    # a given scale: force_scale * F, cut to half the scene's size (and headless) above it
    scale = 0.5 * scene.size / (K * 0.025**1.5)  # delta = 0.025 reaches the cut
    c = _ball_scene(model, sol, force_scale=scale).contacts
    length = np.minimum(scale * force, 0.5 * scene.size)
    np.testing.assert_allclose(c.arrow[:, 0, 2], length, rtol=ROUND_OFF, atol=1e-15)
    np.testing.assert_array_equal(c.cut[:, 0], scale * force > 0.5 * scene.size)
    assert 0 < c.cut.sum() < on.sum()
    k = int(np.argmax(force))
    seg = _arrow_polyline(c.point[k], c.arrow[k], np.array([1.0, 0, 0]), c.cut[k])
    assert len(seg) == 3  # the shaft alone


def _red_pixels(path) -> list[int]:
    from jaxmbd.viz.animation import CONTACT_COLOR

    im = Image.open(path)
    counts = []
    for k in range(im.n_frames):
        im.seek(k)
        counts.append(_hue_pixels(np.asarray(im.convert("RGB")), CONTACT_COLOR))
    return counts


def test_gif_shows_contacts_exactly_when_active_and_hides_them(ball, tmp_path):
    """In the GIF's pixels: contact red beyond the legend's at the active frames only;
    none at all with contacts=False. The ball's own colour is no red."""
    model, sol = ball
    opts = dict(fps=5, size=(320, 240))
    shown = _red_pixels(mbd.plot.animate(model, sol, tmp_path / "c.gif", **opts))
    hidden = _red_pixels(mbd.plot.animate(model, sol, tmp_path / "n.gif", contacts=False, **opts))
    assert len(shown) == len(T_BALL)
    assert max(hidden) == 0
    legend = min(shown)  # the legend's line, in every frame
    for k, on in enumerate(DELTA > 0):
        assert (shown[k] > legend + 15) == on, f"frame {k}: {shown[k]} red pixels"


def test_html_contacts_traces_and_offline_file(ball, tmp_path):
    """The plotly figure: the plane patch once (a static trace), the arrow trace of each
    frame with a shaft exactly at the active slots; contacts=False drops both contact
    traces; the HTML is written."""
    pytest.importorskip("plotly")
    from jaxmbd.viz._animation_html import _plotly_figure

    model, sol = ball
    opts = dict(joints=True, view=(25, -60), size=(500, 400), title="ball", fps=5)
    scene = _ball_scene(model, sol)
    fig = _plotly_figure(scene, **opts)
    names = [tr.name for tr in fig.data]
    assert names[-1] == "ground plane" and names.count("ground plane") == 1
    arrows = next(i for i, n in enumerate(names) if n.startswith("contact forces"))
    c = scene.contacts
    for f, frame in enumerate(fig.frames):
        assert "ground plane" not in [tr.name for tr in frame.data]
        z = frame.data[arrows].z
        if c.active[f, 0]:
            assert z[0] == pytest.approx(H - DELTA[f] / 2, rel=ROUND_OFF)
            assert z[1] - z[0] == pytest.approx(c.scale * K * DELTA[f] ** 1.5, rel=ROUND_OFF)
        else:
            assert len(z) == 0
    hidden = _plotly_figure(_ball_scene(model, sol, contacts=False), **opts)
    assert not [tr.name for tr in hidden.data if tr.name.startswith("contact")]
    path = mbd.plot.animate(model, sol, tmp_path / "c.html", fps=5)
    assert "contact forces" in path.read_text() and "ground plane" in path.read_text()


def test_contacts_option_checks_and_cli(ball, tmp_path):
    """contacts=True on a Solution without slots computes them from the model's pairs (as
    a run read from a file); a model without pairs is refused, as is a non-bool; the CLI's
    --no-contacts passes through."""
    model, sol = ball
    plain = _ball_run(model)  # as read from a file: no contact slots
    assert _ball_scene(model, plain).contacts is None
    np.testing.assert_array_equal(
        _ball_scene(model, plain, contacts=True).contacts.arrow,
        _ball_scene(model, sol).contacts.arrow,
    )
    free = _two_body_model()
    with pytest.raises(ValueError, match="has no contact pairs"):
        mbd.plot.animate(free, _rigid_motion(free, n=3), "x.gif", contacts=True)
    with pytest.raises(ValueError, match="contacts must be True, False or None"):
        mbd.plot.animate(model, sol, "x.gif", contacts="yes")
    for bad in (0.0, -1.0, np.nan, True, "1"):
        with pytest.raises(ValueError, match="force_scale must be a positive"):
            mbd.plot.animate(model, sol, "x.gif", force_scale=bad)
    mbd.save_model(model, tmp_path / "m.json")
    plain.save(tmp_path / "run.npz")
    calls = []
    import jaxmbd.viz.animation

    real = jaxmbd.viz.animation.animate

    def spy(*args, **kwargs):
        calls.append(kwargs["contacts"])
        return real(*args, **kwargs)

    runner = CliRunner()
    args = ["animate", str(tmp_path / "run.npz"), "--model", str(tmp_path / "m.json"), "--fps", "2"]
    import unittest.mock

    with unittest.mock.patch("jaxmbd.viz.animation.animate", spy):
        for flag in ([], ["--no-contacts"], ["--contacts"]):
            result = runner.invoke(app, [*args, "--out", str(tmp_path / "a.gif"), *flag])
            assert result.exit_code == 0, result.output
    assert calls == [True, False, True]
