"""Command line: ``jaxmbd kinematics MODEL ...``, ``jaxmbd simulate MODEL ...``,
``jaxmbd animate RUN_OR_MODEL --out x.gif``, ``jaxmbd info MODEL``, ``jaxmbd models``.

MODEL is a model file (jaxmbd schema, MJCF, URDF or a published SimEngineMBD file) or a
built-in name (``jaxmbd models`` lists them, from :data:`jaxmbd.models.REGISTRY`); a
generated built-in takes its size after a colon (``pendulum_chain:16``). A built-in runs
with its own default formulation and that formulation's default integrator unless
``--formulation`` / ``--integrator`` say otherwise.
"""

from __future__ import annotations

import ast
import itertools
import logging
import math
import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich import box
from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from .analysis.kinematics import kinematics as run_kinematics
from .analysis.linearize import mode_motion, modes
from .analysis.model_report import model_report
from .analysis.simulation import simulate as run_simulate
from .errors import ModelError, SolverError
from .integrators import DEFAULT_INTEGRATOR
from .io import load_model
from .io.controls_file import read_controls
from .model import Model
from .models import REGISTRY, Builtin, load
from .solution import Solution
from .viz import animation
from .viz.animation import FORMATS
from .viz.plot import plot_solution

#: Help texts derived from the integrators' tables (never repeated here).
_FORMULATIONS = ", ".join(DEFAULT_INTEGRATOR)
_DEFAULTS = ", ".join(f"{f} {i}" for f, i in DEFAULT_INTEGRATOR.items())

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="jaxmbd: differentiable constrained multibody dynamics in JAX.",
)
console = Console(stderr=True)


def _setup_logging(verbose: bool):
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=console, show_path=False, show_time=False)],
    )


def _positive(value, option: str, *, zero: bool = False):
    """Refuse NaN, inf and non-positive numbers before any work starts (exit code 2)."""
    if value is None:
        return
    if not (math.isfinite(value) and (value > 0 or (zero and value == 0))):
        need = "non-negative" if zero else "positive"
        raise typer.BadParameter(f"must be a {need} finite number, got {value}", param_hint=option)


def _output(path: Path | None, option: str, suffixes: tuple[str, ...]):
    """An output file must have a known suffix and an existing folder (checked up front)."""
    if path is None:
        return
    if path.suffix.lower() not in suffixes:
        raise typer.BadParameter(
            f"unknown format {path.suffix!r}; use {', '.join(suffixes)}", param_hint=option
        )
    parent = path.resolve().parent
    if not parent.is_dir():
        raise typer.BadParameter(f"folder {str(parent)!r} does not exist", param_hint=option)


def _check_run_options(h, t_end, tol, out, plot):
    _positive(h, "--h")
    _positive(t_end, "--t-end", zero=True)
    _positive(tol, "--tol")
    _output(out, "--out", (".npz", ".csv"))
    _output(plot, "--plot", (".png", ".pdf", ".svg"))


def _builtin(model: str) -> tuple[Builtin, int | None] | None:
    """(metadata, size) of a built-in name, ``NAME:SIZE`` for a generated one, else None."""
    name, colon, size = model.partition(":")
    entry = REGISTRY.get(name)
    if entry is None or (colon and entry.size_argument is None):
        return None
    if not colon:
        return entry, None
    # digits only and few of them: int() of thousands of digits raises, and a huge model
    # would take all memory before any message
    if not (size.isascii() and size.isdigit() and len(size) <= 6) or int(size) < 1:
        raise typer.BadParameter(
            f"{name} takes a positive integer {entry.size_argument} below a million after "
            f"the colon (e.g. {name}:{entry.default_size}), got {size[:20]!r}",
            param_hint="MODEL",
        )
    return entry, int(size)


def _load(model: str) -> Model:
    found = _builtin(model)
    if found is not None:
        return load(found[0].name, found[1])
    path = Path(model)
    try:
        exists = path.is_file()
    except (OSError, ValueError) as err:  # name too long, NUL byte, ...
        raise typer.BadParameter(f"cannot use {model[:80]!r}: {err}", param_hint="MODEL") from None
    if not exists:
        raise typer.BadParameter(
            f"{model!r} is neither a file nor a built-in model ({', '.join(REGISTRY)}; "
            "jaxmbd models lists them)",
            param_hint="MODEL",
        )
    return load_model(path)


def _run_defaults(model: str, formulation: str | None, integrator: str | None):
    """(formulation, options) for a run: a built-in's default formulation (a file: None,
    simulate's default, :func:`jaxmbd.default_formulation`), and
    the registry's options of the model (none of the built-ins needs one today), which
    apply only with that formulation and its default integrator, the pair they were chosen for."""
    found = _builtin(model)
    entry = found[0] if found else None
    if formulation is None:
        formulation = entry.formulation if entry else None
    if (
        entry is not None
        and formulation == entry.formulation
        and integrator in (None, DEFAULT_INTEGRATOR.get(formulation))
    ):
        return formulation, dict(entry.options)
    return formulation, {}


def _default_step(m: Model) -> float:
    """A run's step where ``--h`` is not given: a model file's timestep (simulate's default),
    else 1e-3 s (the built-ins)."""
    return 1e-3 if m.constraint_model is None else m.constraint_model.timestep


def _summary(model: Model, sol, seconds: float, out: Path | None, plot: Path | None):
    it = np.asarray(sol.iterations)
    table = Table(
        title=f"{model.name}: {sol.formulation}"
        + (f", {sol.integrator}" if sol.integrator else "")
        + f", {len(sol.t) - 1} steps",
        show_header=False,
    )
    table.add_row("bodies", ", ".join(model.body_names))
    table.add_row("GCONs", ", ".join(f"{k} {v}" for k, v in model.gcon_counts().items() if v))
    if getattr(sol, "linear_solver", ""):
        table.add_row("linear solver", sol.linear_solver)
    table.add_row("wall time (incl. compile)", f"{seconds:.2f} s")
    # figures the integrator has: an explicit step has no Newton iterations, and a step
    # without iterations or constraint rows no residual
    if it.max() > 0:
        table.add_row(
            "Newton iterations / step",
            f"mean {it[1:].mean():.3f}, max {it.max()}" if len(it) > 1 else str(it[0]),
        )
    residual = float(np.max(np.asarray(sol.residual)))
    if it.max() > 0 or residual > 0:
        table.add_row("max residual", f"{residual:.2e}")
    r_end = np.asarray(sol.r)[-1]  # indexed in numpy: no eager op per body
    for b, name in enumerate(model.body_names):
        table.add_row(f"r of {name} at t_end", np.array2string(r_end[b], precision=6))
    if out:
        table.add_row("written", str(out))
    if plot:
        table.add_row("plot", str(plot))
    Console().print(table)


def _with_progress(fn, label: str):
    with Progress(
        TextColumn(label),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task(label, total=None)

        def report(done, total):
            progress.update(task, completed=done, total=total)

        return fn(report)


def _animate(
    m: Model, sol, path: Path, trace, fps: float, speed: float, contacts: bool | None = None
) -> Path:
    with console.status(f"writing {path}"):
        return animation.animate(
            m, sol, path, traces=trace or None, fps=fps, speed=speed, contacts=contacts
        )


def _run_analysis(
    analysis, label: str, model: str, out, plot, verbose: bool, animate=None, **options
):
    """Load MODEL, run ``analysis`` with a progress bar, write results, print a summary."""
    _setup_logging(verbose)
    if animate is not None and animate.suffix.lower() not in (".gif", ".mp4", ".html"):
        raise typer.BadParameter(
            f"unknown format {animate.suffix!r}; use .gif, .mp4 or .html", param_hint="--animate"
        )
    try:
        m = _load(model)
        start = time.perf_counter()
        sol = _with_progress(lambda report: analysis(m, progress=report, **options), label)
        seconds = time.perf_counter() - start
    except (ModelError, SolverError, ValueError, TypeError) as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(code=1) from None
    if out:
        out = sol.save(out)
    if plot:
        plot_solution(sol, plot, title=f"{m.name}: {label} ({sol.formulation})")
    if animate:
        try:
            _animate(m, sol, animate, None, 25.0, 1.0)
        except (RuntimeError, ValueError) as err:
            console.print(f"[red]error:[/red] {err}")
            raise typer.Exit(code=1) from None
    _summary(m, sol, seconds, out, plot)
    if animate:
        Console().print(f"animation: {animate}")


@app.command()
def kinematics(
    model: Annotated[str, typer.Argument(help="model file or built-in name")],
    formulation: Annotated[str, typer.Option(help="rA, rp or re")] = "rA",
    h: Annotated[float, typer.Option("--h", help="step size [s]")] = 1e-3,
    t_end: Annotated[float, typer.Option("--t-end", help="end time [s]")] = 3.0,
    tol: Annotated[float, typer.Option(help="Newton correction tolerance")] = 1e-10,
    linear_solver: Annotated[
        str,
        typer.Option(
            "--linear-solver",
            help="auto (default: structured from 300 unknowns), dense (LU of G) or "
            "structured (block elimination on the body-joint graph, large mechanisms)",
        ),
    ] = "auto",
    out: Annotated[Path | None, typer.Option(help="write the Solution (.npz or .csv)")] = None,
    plot: Annotated[Path | None, typer.Option(help="write a PNG plot")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
):
    """Kinematic analysis of a 0-DOF (driven) mechanism."""
    _check_run_options(h, t_end, tol, out, plot)
    _run_analysis(
        run_kinematics,
        "kinematics",
        model,
        out,
        plot,
        verbose,
        formulation=formulation,
        t_end=t_end,
        h=h,
        tol=tol,
        linear_solver=linear_solver,
    )


@app.command()
def simulate(
    model: Annotated[str, typer.Argument(help="model file or built-in name")],
    formulation: Annotated[
        str | None,
        typer.Option(
            help=f"{_FORMULATIONS} (default: the built-in's own, see jaxmbd models; a "
            "file: joint where it runs the model, else rA)"
        ),
    ] = None,
    h: Annotated[
        float | None,
        typer.Option("--h", help="step size [s] (default: a model file's timestep, else 1e-3)"),
    ] = None,
    t_end: Annotated[float, typer.Option("--t-end", help="end time [s]")] = 3.0,
    tol: Annotated[
        float | None,
        typer.Option(
            help="relative Newton tolerance of the implicit integrators (1e-3 h^2 in [1e-10, 1e-6])"
        ),
    ] = None,
    integrator: Annotated[
        str | None,
        typer.Option(
            help="gen_alpha (second order), backward_euler (paper 1), rkmk (Mueller-Terze), "
            "energy_momentum (Betsch-Leyendecker) or rk (Dumitriu-Margaritescu); default: "
            f"the formulation's ({_DEFAULTS})"
        ),
    ] = None,
    rho_inf: Annotated[
        float | None,
        typer.Option("--rho-inf", help="gen_alpha spectral radius at infinity in [0, 1] (0.9)"),
    ] = None,
    variant: Annotated[
        str | None,
        typer.Option(help="gen_alpha variant: stabilised (GGL, default) or index3"),
    ] = None,
    newton: Annotated[
        str | None,
        typer.Option(help="implicit integrators: reuse (rA, rp default), full (re) or modified"),
    ] = None,
    option: Annotated[
        list[str] | None,
        typer.Option(
            "--option",
            "-o",
            help="any other integrator option as KEY=VALUE, repeatable (e.g. -o tableau=rk4, "
            "-o scheme=null_space, -o multipliers=one_step); VALUE is a Python literal or text",
        ),
    ] = None,
    controls: Annotated[
        Path | None,
        typer.Option(
            help="actuator controls from a CSV file: a header naming every actuator (and "
            "optionally t), then one line per step, one line held over the run, or lines at "
            "times t held until the next (docs/guide/cli.md)",
        ),
    ] = None,
    contact: Annotated[
        str | None,
        typer.Option(
            help="contact pairs: soft (MuJoCo's constraint model, a model file's default), "
            "compliant (a built-in's default), hard (moreau_jean) or none"
        ),
    ] = None,
    limits: Annotated[
        str | None,
        typer.Option(
            help="joint limits and friction loss: soft (a model file's default), compliant "
            "(a built-in's default), hard (moreau_jean) or none"
        ),
    ] = None,
    save_every: Annotated[
        int,
        typer.Option(
            "--save-every",
            min=1,
            help="keep every k-th step (flat memory for long runs; k divides t_end / h)",
        ),
    ] = 1,
    out: Annotated[Path | None, typer.Option(help="write the Solution (.npz or .csv)")] = None,
    plot: Annotated[Path | None, typer.Option(help="write a PNG plot")] = None,
    animate: Annotated[
        Path | None, typer.Option(help="write a 3-D animation (.gif, .mp4 or .html)")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
):
    """Dynamics with any formulation and integrator pair (default: the model's formulation,
    then that formulation's integrator)."""
    _check_run_options(h, t_end, tol, out, plot)
    extra = _parse_options(option or [])
    named = {"formulation", "t_end", "h", "tol", "integrator", "rho_inf", "variant", "newton",
             "progress", "model", "out", "plot", "verbose", "animate", "save_every",
             "controls", "contact", "limits"}  # fmt: skip
    clash = sorted(named & set(extra))
    if clash:
        raise typer.BadParameter(
            f"{clash} have their own options (--{clash[0].replace('_', '-')})",
            param_hint="--option",
        )
    formulation, model_options = _run_defaults(model, formulation, integrator)
    if controls is not None and not controls.is_file():
        raise typer.BadParameter(f"no file {str(controls)!r}", param_hint="--controls")

    def analysis(m, h, **options):
        h = _default_step(m) if h is None else h
        u = None if controls is None else read_controls(controls, m, t_end=t_end, h=h)
        return run_simulate(m, controls=u, h=h, **options)

    _run_analysis(
        analysis,
        "dynamics",
        model,
        out,
        plot,
        verbose,
        animate=animate,
        formulation=formulation,
        t_end=t_end,
        h=h,
        tol=tol,
        integrator=integrator,
        rho_inf=rho_inf,
        variant=variant,
        newton=newton,
        save_every=save_every,
        contact=contact,
        limits=limits,
        **{**model_options, **extra},
    )


def _parse_options(pairs: list[str]) -> dict:
    """KEY=VALUE strings -> options; VALUE through ast.literal_eval (numbers, booleans,
    None, tuples), else kept as text. A malformed pair exits with code 2 and says which."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            console.print(f"[red]error:[/red] --option expects KEY=VALUE, got {pair!r}")
            raise typer.Exit(code=2)
        try:
            options[key] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            options[key] = value.strip()
    return options


@app.command(name="animate")
def animate_command(
    run: Annotated[
        str,
        typer.Argument(
            help="a Solution file (.npz, with --model) or a model (file or built-in name), "
            "which is then simulated with --formulation/--integrator/--h/--t-end"
        ),
    ],
    out: Annotated[Path, typer.Option(help="output file: .gif, .mp4 or .html")],
    model: Annotated[
        str | None, typer.Option(help="the model of a .npz run (file or built-in name)")
    ] = None,
    formulation: Annotated[
        str | None, typer.Option(help="when simulating a model (default: the model's own)")
    ] = None,
    integrator: Annotated[str | None, typer.Option(help="when simulating a model")] = None,
    h: Annotated[
        float | None,
        typer.Option(
            "--h",
            help="step size [s] when simulating (default: a model file's timestep, else 1e-3)",
        ),
    ] = None,
    t_end: Annotated[float, typer.Option("--t-end", help="end time [s] when simulating")] = 2.0,
    trace: Annotated[
        list[str] | None, typer.Option(help="draw the path of this body's centre (repeatable)")
    ] = None,
    fps: Annotated[float, typer.Option(help="frames per second")] = 25.0,
    speed: Annotated[float, typer.Option(help="simulated seconds per second")] = 1.0,
    contacts: Annotated[
        bool | None,
        typer.Option(
            "--contacts/--no-contacts",
            help="draw the active contact points and their force arrows (default: when the "
            "model has contact pairs; a .npz run's are computed from the model's pairs)",
        ),
    ] = None,
    mode: Annotated[
        int | None,
        typer.Option(
            help="animate natural mode K of the model about its static equilibrium instead "
            "of a run (0 = the lowest frequency; jaxmbd.modes)",
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
):
    """Animate a saved run or a model in 3-D: bodies, ground planes, joints, contact forces,
    traces, time label; or a model's natural mode (--mode)."""
    _setup_logging(verbose)
    _output(out, "--out", tuple(FORMATS))
    _positive(h, "--h")
    _positive(t_end, "--t-end", zero=True)
    _positive(fps, "--fps")
    _positive(speed, "--speed")
    try:
        if mode is not None:
            if run.endswith(".npz"):
                raise typer.BadParameter("--mode animates a model, not a run", param_hint="--mode")
            m = _load(run)
            found = modes(m)
            sol = mode_motion(m, found, mode)
            Console().print(
                f"mode {mode}: {found.frequencies[mode]:.6g} Hz, damping ratio "
                f"{found.damping_ratios[mode]:.3g} ({len(found.frequencies)} modes)"
            )
            contacts = False
        elif run.endswith(".npz"):
            if model is None:
                raise typer.BadParameter(
                    "a .npz run needs --model (the model file or built-in name it was run on)",
                    param_hint="--model",
                )
            m = _load(model)
            try:
                sol = Solution.load(run)
            except (OSError, KeyError, ValueError) as err:
                raise ModelError(f"{run}: cannot read the Solution ({err})") from None
            if contacts is None:  # a file keeps no contact slots: the model's pairs give them
                contacts = m.contacts is not None or None
        else:
            m = _load(run)
            unknown = sorted(set(trace or ()) - set(m.body_names))
            if unknown:
                raise typer.BadParameter(
                    f"unknown bodies {unknown}; known: {list(m.body_names)}", param_hint="--trace"
                )
            formulation, options = _run_defaults(run, formulation, integrator)
            if h is None:
                h = _default_step(m)
            sol = _with_progress(
                lambda report: run_simulate(
                    m,
                    formulation=formulation,
                    integrator=integrator,
                    h=h,
                    t_end=t_end,
                    progress=report,
                    **options,
                ),
                "dynamics",
            )
        path = _animate(m, sol, out, trace, fps, speed, contacts)
    except (ModelError, SolverError, RuntimeError, ValueError) as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(code=1) from None
    Console().print(f"animation: {path} ({len(sol.t)} steps, {m.nb} bodies)")


def _wide_console(table: Table) -> Console:
    """A console as wide as ``table`` needs to show every cell on one line (at least the
    terminal's width, at most 200 columns; beyond, the cells wrap)."""
    console = Console()
    need = 1 + sum(
        3 + max(len(str(cell)) for cell in (column.header, *column.cells))
        for column in table.columns
    )
    return Console(width=max(console.width, min(need, 200)))


@app.command()
def models():
    """List the built-in models by paper: default formulation and integrator, description."""
    table = Table(title="built-in models: jaxmbd simulate NAME", box=box.SIMPLE_HEAD)
    table.add_column("model", no_wrap=True)
    table.add_column("formulation", no_wrap=True)
    table.add_column("integrator", no_wrap=True)
    table.add_column("description")
    for paper, entries in itertools.groupby(REGISTRY.values(), key=lambda e: e.paper):
        table.add_row(f"[bold]{paper}[/bold]")
        for entry in entries:
            name, description = entry.name, entry.description
            if entry.size_argument is not None:
                name += ":N"
                description += f" (N = {entry.size_argument}, default {entry.default_size})"
            if entry.options:
                description += "; runs with " + ", ".join(
                    f"{k}={v}" for k, v in entry.options.items()
                )
            integrator = DEFAULT_INTEGRATOR.get(entry.formulation, "-")
            table.add_row(f"  {name}", entry.formulation, integrator, description)
    Console().print(table)


@app.command()
def info(model: Annotated[str, typer.Argument(help="model file or built-in name")]):
    """Describe a model: bodies, joints (dynamics, limits), force elements, contact pairs,
    actuators, sensors, markers, constraints, degrees of freedom."""
    _setup_logging(False)
    try:
        m = _load(model)
    except ModelError as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(code=1) from None
    for section in model_report(m):
        table = Table(title=f"{m.name}: {section.title}" if section.title != "bodies" else m.name)
        for column in section.columns:
            # long names and numbers wrap onto the next line instead of being cut
            table.add_column(column, overflow="fold")
        for row in section.rows:
            table.add_row(*row)
        _wide_console(table).print(table)
    found = _builtin(model)
    if found is not None:
        entry = found[0]
        Console().print(f"built-in: {entry.paper}; default formulation {entry.formulation}")
    counts = ", ".join(f"{k} {v}" for k, v in m.gcon_counts().items() if v)
    Console().print(f"constraint equations: {m.nc} ({counts})")
    Console().print(f"degrees of freedom: {6 * m.nb - m.nc}")


if __name__ == "__main__":
    app()
