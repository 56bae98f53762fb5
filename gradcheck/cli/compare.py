"""``gradcheck compare``: run B against run A, parameter by parameter."""

from __future__ import annotations

import click

from gradcheck.cli.options import (
    COMPARE_FORMAT_CHOICES,
    Reading,
    complete_paths,
    format_options,
    reading_options,
    steps_option,
    width_option,
)
from gradcheck.cli.outcome import say
from gradcheck.cli.output import emit, env_of, format_comparison, progress_bar
from gradcheck.cli.status import ExitStatus
from gradcheck.report.interface import Env, FormatOptions

COMPARE_EXIT_STATUS_HELP = """\b
Exit status:
  0  compared (with --fail-on-divergence: no parameter diverges)
  1  with --fail-on-divergence: at least one parameter diverges
  2  usage, input or output error (bad option, missing path, a path
     without exactly one run, no parameter or step in common)
  3  internal error (a bug: rerun with --debug and report it)
  130  interrupted (Ctrl-C, SIGINT)
  143  terminated (SIGTERM)"""


@click.command(epilog=COMPARE_EXIT_STATUS_HELP)
@click.argument("run_a", metavar="RUN_A", shell_complete=complete_paths)
@click.argument("run_b", metavar="RUN_B", shell_complete=complete_paths)
@format_options(COMPARE_FORMAT_CHOICES, "comparison")
@steps_option
@click.option(
    "--layer", metavar="GLOB", help="Only parameters whose name (in A or B) matches GLOB."
)
@width_option
@click.option(
    "--fail-on-divergence",
    is_flag=True,
    help="Exit 1 when a parameter diverges (a CI check that a training loop still matches"
    " its reference).",
)
@reading_options(jobs=True)
@click.pass_context
def compare(
    ctx: click.Context,
    run_a: str,
    run_b: str,
    format_name: str,
    output: str | None,
    steps: str | None,
    layer: str | None,
    width: int | None,
    fail_on_divergence: bool,
    reading: Reading,
) -> ExitStatus:
    """Compare run B with run A, parameter by parameter (ratios B over A).

    For "model.fit() trains, my hand-written step explodes": parameters matched by name
    (Keras model scopes and layer numbering normalised), steps aligned on those both logged;
    gradient-norm and update ratios, weights that move in one run only, each run's verdict,
    and the likely cause in one sentence. Most different first.
    """
    from gradcheck.compare.runs import compare_runs
    from gradcheck.events.steps import StepWindow
    from gradcheck.pipeline import load_runs

    env = env_of(ctx, width)
    config, rules = reading.settings()
    window = StepWindow.parse(steps) if steps is not None else None
    storage = reading.storage()  # a bad option before any cluster starts
    with (
        reading.workers() as workers,
        progress_bar(env, enabled=not reading.no_progress) as progress,
    ):
        run_a_data, run_b_data = load_runs(
            [run_a, run_b],
            config=config,
            rules=rules,
            steps=window,
            progress=progress,
            jobs=reading.jobs,
            workers=workers,
            storage_options=storage,
        )
    comparison = compare_runs(run_a_data, run_b_data, config=config, rules=rules, layer_glob=layer)
    file_env = Env() if width is None else Env(width=width)
    options = FormatOptions(env=env if output is None else file_env)
    emit(format_comparison(comparison, format_name, options), output)
    if output is not None:
        say(f"wrote {format_name} comparison to {output}")
    diverged = any(parameter.diverges for parameter in comparison.parameters)
    return ExitStatus.FINDINGS if fail_on_divergence and diverged else ExitStatus.OK
