"""Issue 46, classes 1 and 6: every path a command writes goes through the one output guard
(:mod:`interp_init.outputs`), and no message names our temporary files.

The tests enumerate the path-valued options of every command from the click commands
themselves (``interp-init`` and the click scripts under ``experiments/`` and
``benchmarks/``): a new option fails :func:`test_every_path_option_is_classified` until
it is given hostile targets here.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from helpers import ROOT, load_script

import training
from interp_init import fileio
from interp_init.fileio import atomic_write
from interp_init.outputs import OUTPUTS_RECORD, check_output_file, write_output
from training.cli import cli, main
from training.cli.errors import run_command
from training.config import make_run_config
from training.config import one_line

#: Path-valued options a command reads, never writes (``command option``).
INPUTS = {
    "interp-init sweep spec",
    "interp-init concept-graphs spec",
    "interp-init phase-diagram sweep_dir",
    "interp-init report run_dirs",
    "experiments/race.py folders",
    "experiments/paper_statistic.py folder",
    "benchmarks/bench_denormal.py run_dir",
    "experiments/search_cpu.py status root",
    "experiments/search_cpu.py json root",
    "experiments/search_cpu.py table root",
    "experiments/search_cpu.py rates folders",
    "experiments/store.py source",
    "experiments/tables.py records",
    "experiments/package_pretrained.py source",
    "experiments/package_pretrained.py records",  # it writes only interp_init/pretrained/, its own
    "experiments/contrast.py fig2 small",
    "experiments/contrast.py fig2 large",
    "experiments/contrast.py slice folders",
    "experiments/contrast.py figure small",
    "experiments/contrast.py figure large",
    "experiments/contrast.py figure slices",
    "experiments/fig7.py compare small",
    "experiments/fig7.py compare large",
    "experiments/fig7.py figure small",
    "experiments/fig7.py figure large",
}
#: Path-valued options whose command edits files it did not make, and why that is its job.
IN_PLACE = {
    "experiments/tables.py root": "the repository whose README.md and docs/ it regenerates: it rewrites only the blocks between its own markers",
}

#: Every path-valued option a command writes to, and the places it must refuse (each a
#: key of the ``places`` fixture, or a path below one): a run folder R, a sweep folder S,
#: a read-only place ro, a user's own file, ...
OUTPUTS: dict[str, list[str]] = {
    "interp-init train out": ["S", "S/seed=7", "R/sub", "ro/run", "mine.txt", "long"],
    "interp-init sweep out": ["R", "R/sub", "S/sub", "ro/s", "mine.txt", "long"],
    "interp-init reproduce out": ["R", "R/sub", "S", "S/sub", "ro/p", "mine.txt", "long"],
    "interp-init concept-graphs out": ["R", "R/sub", "S", "S/sub", "ro/p", "mine.txt", "long"],
    "interp-init phase-diagram out": [
        "R/x.html",
        "mine.html",
        "S/results.csv",
        "ro/x.html",
        "out.png",
        "R",
        "S",
        "long",
    ],
    "interp-init report out": ["R/x.html", "mine.html", "S/sweep.json", "ro/x.html", "x.png", "long"],
    "interp-init report images": ["R", "S", "R/sub", "imgs", "ro/imgs", "r.html", "long"],
    "experiments/race.py figure": ["R/x.png", "S/x.png", "ro/x.png", "imgs/curves.png", "long.png"],
    "experiments/contrast.py figure out": ["R/x.png", "S/x.png", "ro/x.png", "imgs/curves.png", "long.png"],
    "experiments/fig7.py figure out": ["R/x.png", "S/x.png", "ro/x.png", "imgs/curves.png", "long.png"],
    "experiments/search_cpu.py run root": ["R", "S", "S/sub", "R/sub", "ro/root", "long"],
    "benchmarks/gpu_suite.py out": ["R", "S", "S/sub", "R/sub", "ro/x", "long"],
    "benchmarks/gpu_campaign.py out": ["R", "S", "S/sub", "R/sub", "ro/x", "long"],
    "benchmarks/gpu_campaign.py results": ["R", "S", "S/sub", "R/sub", "ro/x", "long"],
    "benchmarks/gpu_campaign.py archive": ["mine.txt", "R/x.tar.gz", "ro/x.tar.gz", "S", "long"],
    "benchmarks/bf16_accuracy.py out": ["R", "S", "S/sub", "R/sub", "long"],
    "experiments/store.py dest": ["R", "S", "R/sub", "mine.txt"],
}


def _commands() -> dict[str, click.Command]:
    """Every click command: ``interp-init NAME`` and each click script's, by path (and sub-command)."""
    found: dict[str, click.Command] = {}

    def walk(prefix: str, command: click.Command) -> None:
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(f"{prefix} {name}".strip(), sub)
        else:
            found[prefix] = command

    walk("interp-init", cli)
    for path in sorted([*ROOT.glob("experiments/*.py"), *ROOT.glob("benchmarks/*.py")]):
        if "import click" not in path.read_text():
            continue
        module, name = load_script(path.relative_to(ROOT).as_posix()), path.relative_to(ROOT).as_posix()
        commands = [
            obj
            for obj in vars(module).values()
            if isinstance(obj, click.Command) and getattr(obj.callback, "__module__", None) == module.__name__
        ]
        grouped = {id(sub) for group in commands if isinstance(group, click.Group) for sub in group.commands.values()}
        for command in commands:
            if id(command) not in grouped:  # a group's sub-commands are walked from it
                walk(name, command)
    return found


_PATH_WORDS = {"out", "dir", "dirs", "path", "root", "images", "figure", "file", "folder", "folders", "spec"}


def _path_options() -> set[str]:
    """``command option`` of every path-valued option: a ``click.Path``, or a name that says so."""
    return {
        f"{name} {param.name}"
        for name, command in _commands().items()
        for param in command.params
        if isinstance(param.type, click.Path)
        or (param.name is not None and _PATH_WORDS & set(param.name.split("_")) and param.type.name == "text")
    }


def test_every_path_option_is_classified() -> None:
    """A new path-valued option of any command fails here until it is classified as read
    (:data:`INPUTS`) or written (:data:`OUTPUTS`, with the places it must refuse)."""
    assert _path_options() == INPUTS | set(OUTPUTS) | set(IN_PLACE)


# ------------------------------------------------------------------ every output against the guard


@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("guards")
    training.train(make_run_config("tiny", epochs=1, n_train=300), root / "R", device="cpu", progress=False)
    spec = root / "spec.json"
    spec.write_text('{"base": {"preset": "tiny", "epochs": 1, "n_train": 300}, "grid": {"seed": [0]}}')
    assert main(["sweep", str(spec), "--out", str(root / "S"), "--device", "cpu", "--quiet"]) == 0
    return {"R": root / "R", "S": root / "S", "spec": spec}


@pytest.fixture()
def places(originals: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run R, a sweep S, a read-only folder ro (this process may not write there), a
    user's files (mine.txt, mine.html, imgs/curves.png) and a sweep spec in ``tmp_path``."""
    shutil.copytree(originals["R"], tmp_path / "R")
    shutil.copytree(originals["S"], tmp_path / "S")
    (tmp_path / "ro").mkdir()
    for name in ("mine.txt", "mine.html"):
        (tmp_path / name).write_text("mine\n")
    shutil.copy(originals["spec"], tmp_path / "spec.json")
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "curves.png").write_bytes(b"my own figure")
    real_access = os.access
    monkeypatch.setattr(
        fileio.os,
        "access",
        lambda path, mode, **kw: False if Path(path).name == "ro" else real_access(path, mode, **kw),
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _argv(option: str, target: str) -> tuple[Callable[[list[str]], int], list[str]]:
    """The command line that writes its ``option`` at ``target`` (all else valid and tiny)."""
    long = "x" * 300
    target = {"long": long, "long.png": long + ".png"}.get(target, target)
    argv = {
        "interp-init train out": [
            "train",
            "--preset",
            "tiny",
            "--epochs",
            "1",
            "--quiet",
            "--device",
            "cpu",
            "--out",
            target,
        ],
        "interp-init sweep out": ["sweep", "spec.json", "--out", target, "--quiet", "--device", "cpu"],
        "interp-init reproduce out": [
            "reproduce",
            "--preset",
            "tiny",
            "--out",
            target,
            "--quiet",
            "--device",
            "cpu",
            "--workers",
            "1",
        ],
        "interp-init concept-graphs out": [
            "concept-graphs",
            str(ROOT / "experiments/population-specs/concept-graphs-fig6.json"),
            "--size",
            "tiny",
            "--out",
            target,
            "--quiet",
        ],
        "interp-init phase-diagram out": ["phase-diagram", "S", "--out", target],
        "interp-init report out": ["report", "R", "--out", target, "--per-pair", "2"],
        "interp-init report images": [
            "report",
            "R",
            "--out",
            "r.html",
            "--images",
            target,
            "--per-pair",
            "2",
        ],  # r.html: both at one path
        "experiments/race.py figure": ["S", "--figure", target],
        "experiments/contrast.py figure out": ["figure", "--small", "S", "--large", "S", "--out", target],
        "experiments/fig7.py figure out": ["figure", "--small", "S", "--large", "S", "--out", target],
        "experiments/search_cpu.py run root": [
            "run",
            "--root",
            target,
            "task=symmetric,d_model=16,n_train=300,epochs=1",
        ],
        "benchmarks/gpu_suite.py out": [
            "--out",
            target,
            "--scale",
            "tiny",
            "--device",
            "cpu",
            "--seeds",
            "0",
            "--task",
            "symmetric",
            "--peak-tflops",
            "1",
            "--efficiency",
            "0.5",
            "--probe-steps",
            "0",
        ],
        **{
            f"benchmarks/gpu_campaign.py {name}": [
                "next",
                "--scale",
                "tiny",
                "--device",
                "cpu",
                "--peak-tflops",
                "1",
                "--budget-seconds",
                "1",
                *(["--out", "runs", "--results", "records", "--archive", "a.tar.gz"]),
                f"--{name}",
                target,
            ]
            for name in ("out", "results", "archive")
        },
        "benchmarks/bf16_accuracy.py out": ["--only", "tiny", "--out", target],
        "experiments/store.py dest": [
            "S",
            target,
            "--command",
            "c",
            "--commit",
            "abcdef0",
            "--machine",
            "m",
            "--beside",
            "nothing",
        ],
    }[option]
    if option.startswith("interp-init"):
        return main, argv
    script = option.split()[0]
    command = load_script(script)
    group = command.cli if hasattr(command, "cli") else command.main

    def run(args: list[str]) -> int:  # as the script's process runs it: through the one error layer
        return run_command(group, args, script)

    return run, argv


@pytest.mark.parametrize(
    ("option", "target"),
    [(o, t) for o, ts in OUTPUTS.items() for t in ts],
    ids=[f"{o.split('/')[-1]}->{t}" for o, ts in OUTPUTS.items() for t in ts],
)
def test_every_output_refuses_what_it_did_not_make(
    option: str, target: str, places: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each written path, whatever flag named it, is refused (exit 2, one line naming the flag
    or the path, no traceback) at a run or study folder, inside a run folder, inside a study
    that does not name it, in a read-only place, over a user's file, at a name too long,
    or at the path of another output; and nothing in the places changes."""
    before = _snapshot(places)
    run, argv = _argv(option, target)
    assert run(argv) == 2, capsys.readouterr()
    err = capsys.readouterr().err
    assert "Traceback" not in err and ".tmp-" not in err, err
    if target.startswith("long"):  # the message names the flag, not a file the command would have read
        flag = "--" + option.split()[-1]
        assert flag in err and "sweep.json" not in err and "metrics.json" not in err, err
    assert _snapshot(places) == before
    assert not (places / "ro").exists() or list((places / "ro").iterdir()) == []


def test_report_images_never_replace_a_users_file_and_replace_their_own(tmp_path: Path) -> None:
    """The issue's instance: ``--images DIR`` holding the user's curves.png is refused before
    any work; a file the report wrote (recorded with its digest) is replaced by the next
    report, and one the user changed since is not."""
    target = tmp_path / "imgs" / "curves.png"
    write_output(target, b"first", "report image", "--images")
    assert (tmp_path / "imgs" / OUTPUTS_RECORD).is_file()
    write_output(target, b"second", "report image", "--images")  # its own, unchanged: replaced
    assert target.read_bytes() == b"second"
    target.write_bytes(b"edited by hand")
    with pytest.raises(ValueError, match="did not write .or one changed since"):
        check_output_file(target, "report image", "--images")
    target.unlink()
    write_output(target, b"third", "report image", "--images")
    with pytest.raises(ValueError, match="is a report image, not a phase-diagram"):
        write_output(target, b"fourth", "phase-diagram", "--out")  # another purpose's file


# ------------------------------------------------------------------ class 6: no temporary file named


def _raising(kind: str) -> Callable[[Path], None]:
    def write(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        if kind == "oserror":
            raise OSError(errno.EACCES, "Permission denied", str(tmp))
        raise RuntimeError(f"File {tmp} cannot be opened.")  # torch.save's words

    return write


#: Every way a write can fail that could name its temporary file: the temporary's creation,
#: the writer (ours, a library's OSError, a library's own error text), the rename, and the
#: clean-up after a failure (a read-only file system refuses that too).
FAILURES = ["open", "writer-oserror", "writer-runtime", "rename", "rename-and-unlink"]


@pytest.mark.parametrize("failure", FAILURES)
def test_no_write_error_names_a_temporary_file(failure: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "rep.html"
    data: bytes | Callable[[Path], None] = b"page"
    real_open, real_replace, real_unlink = open, os.replace, Path.unlink
    if failure == "open":
        monkeypatch.setattr(
            "builtins.open",
            lambda f, *a, **k: (
                (_ for _ in ()).throw(OSError(errno.EROFS, "Read-only file system", str(f)))
                if ".tmp-" in str(f)
                else real_open(f, *a, **k)
            ),
        )
    elif failure.startswith("writer"):
        data = _raising(failure.split("-")[1])
    else:
        monkeypatch.setattr(
            fileio.os,
            "replace",
            lambda a, b: (_ for _ in ()).throw(OSError(errno.EROFS, "Read-only file system", str(a), None, str(b))),
        )
        if failure == "rename-and-unlink":
            monkeypatch.setattr(
                Path,
                "unlink",
                lambda self, missing_ok=False: (_ for _ in ()).throw(
                    OSError(errno.EROFS, "Read-only file system", str(self))
                ),
            )
    with pytest.raises(OSError) as info:
        atomic_write(target, data)
    monkeypatch.setattr("builtins.open", real_open)
    monkeypatch.setattr(fileio.os, "replace", real_replace)
    monkeypatch.setattr(Path, "unlink", real_unlink)
    line = one_line(info.value)
    assert ".tmp-" not in line and str(target) in line, line


def test_one_line_never_names_a_temporary_file() -> None:
    """The command line's last resort: an error naming a temporary file names its target."""
    line = one_line(OSError(errno.EROFS, "Read-only file system", "ro/.rep.html.tmp-bb5b0123456789ab"))
    assert line == "cannot write or read ro/rep.html: Read-only file system"


@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0, reason="mounts a read-only tmpfs (root on Linux)")
def test_a_real_read_only_file_system_is_named_with_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.system(f"mount -t tmpfs -o ro,size=64k none {ro} 2>/dev/null") != 0:
        pytest.skip("mounting is not allowed here")
    try:
        assert main(["report", str(tmp_path), "--out", str(ro / "rep.html")]) == 2
        err = capsys.readouterr().err
        assert f"--out {ro / 'rep.html'}: cannot write in {ro} (it is on a read-only file system)" in err, err
    finally:
        os.system(f"umount {ro}")


#: The files a command writes into its folder without a flag naming them, by command: a
#: file of one's own by that name is never replaced (a study's own is).
OWN_FILES = {
    "sweep": ("results.csv", ["sweep", "spec.json", "--out", "F", "--quiet", "--device", "cpu"]),
    "phase-diagram of a folder of runs": ("results.csv", ["phase-diagram", "F", "--out", "p.html"]),
    "reproduce summary": (
        "summary.json",
        ["reproduce", "--preset", "tiny", "--out", "F", "--quiet", "--device", "cpu", "--workers", "1"],
    ),
    "reproduce report": (
        "report.html",
        ["reproduce", "--preset", "tiny", "--out", "F", "--quiet", "--device", "cpu", "--workers", "1"],
    ),
}


@pytest.mark.parametrize("case", sorted(OWN_FILES))
def test_a_file_of_ones_own_where_a_command_writes_its_own_is_never_replaced(
    case: str, places: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, argv = OWN_FILES[case]
    folder = places / "F"
    folder.mkdir()
    if case.startswith("phase-diagram"):
        shutil.copytree(places / "R", folder / "a")  # a folder of runs made by hand
    (folder / name).write_text("mine\n")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"F/{name} exists and is" in err and "never overwritten" in err, err
    assert (folder / name).read_text() == "mine\n"


def test_every_input_path_too_long_is_one_line_naming_it(places: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A read path longer than the file system takes: one line, never a file the command would read inside it."""
    long = "y" * 300
    for argv in (
        ["phase-diagram", long],
        ["sweep", long + ".json", "--out", "o"],
        ["report", "R", long, "--out", "r.html"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and "metrics.json" not in err and "config.json" not in err, err


# ------------------------------------------------------------------ issue 56: every script's numbers and errors


#: Number options of ``interp-init`` validated by the dataclass they fill, which refuses a
#: non-finite or out-of-range value naming the field (tests/training/test_hostile.py).
VALIDATED_BY_THEIR_DATACLASS = {
    **{
        f"interp-init train {name}": "RunConfig"
        for name in (
            "gamma",
            "gamma_embed",
            "gamma_qk",
            "gamma_vo",
            "gamma_mlp",
            "gamma_unembed",
            "lr",
            "warmup_start_lr",
            "min_lr",
            "warmup_epochs",
            "cosine_epochs",
            "weight_decay",
            "beta1",
            "beta2",
            "eps",
            "grad_clip",
            "stop_below_loss",
        )
    },
    **{
        f"interp-init phase-diagram {name}": "the phase diagram's thresholds"
        for name in ("id_threshold", "ood_threshold", "loss_threshold", "pair_threshold")
    },
}


def _scripts() -> dict[str, click.Command]:
    """Each click script's own top-level command or group, by path."""
    found = {}
    for path in sorted([*ROOT.glob("experiments/*.py"), *ROOT.glob("benchmarks/*.py")]):
        if "import click" in path.read_text():
            module = load_script(path.relative_to(ROOT).as_posix())
            commands = [
                o
                for o in vars(module).values()
                if isinstance(o, click.Command) and getattr(o.callback, "__module__", None) == module.__name__
            ]
            grouped = {
                id(sub) for group in commands if isinstance(group, click.Group) for sub in group.commands.values()
            }
            found |= {path.relative_to(ROOT).as_posix(): c for c in commands if id(c) not in grouped}
    return found


def test_every_script_runs_through_the_one_error_layer() -> None:
    """Every click script of experiments/ and benchmarks/ is a ``Script`` (or ``ScriptGroup``):
    its errors are one line and exit 2, SIGINT/SIGTERM 130/143, as ``interp-init``'s."""
    from training.cli.errors import Script, ScriptGroup

    scripts = _scripts()
    assert (
        len(scripts) >= 13
        and {name: type(c).__name__ for name, c in scripts.items() if not isinstance(c, (Script, ScriptGroup))} == {}
    )


def _number_options() -> dict[str, click.Parameter]:
    return {
        f"{name} {p.name}": p
        for name, command in _commands().items()
        for p in command.params
        if isinstance(p.type, (click.types.FloatParamType, click.types.IntParamType))
        or type(p.type).__name__ == "Number"
    }


def test_every_number_option_is_finite_and_bounded_by_the_projects_type() -> None:
    """Every float option of every command (and every integer option of the scripts that are
    not speed benchmarks) is a :class:`training.cli.flags.Number` (finite, bounded, named in the
    message), or is validated by the dataclass it fills; click's ``FloatRange`` lets nan through."""
    from training.cli.flags import Number

    loose = {
        name
        for name, p in _number_options().items()
        if not isinstance(p.type, Number)
        and name not in VALIDATED_BY_THEIR_DATACLASS
        and (
            isinstance(p.type, click.types.FloatParamType)
            or not name.startswith(("interp-init", "benchmarks/bench", "benchmarks/bf16"))
        )
    }
    counted = {
        name
        for name in loose
        if isinstance(_number_options()[name].type, click.types.IntParamType)
        and not name.split()[-1].startswith("slurm_")
    }
    from test_guards_studies import COUNTS, NOT_COUNTS

    scheduler = {
        name for name in loose if name.split()[-1].startswith("slurm_")
    }  # the --slurm-* counts: the scheduler's own refusal bounds them
    assert loose - counted - scheduler == set() and counted <= set(COUNTS) | set(
        NOT_COUNTS
    )  # the other integers: bounded by the counts test


def _script_numbers() -> list[tuple[str, str]]:
    from training.cli.flags import Number

    out = []
    for option, p in sorted(_number_options().items()):
        if isinstance(p.type, Number) and not option.startswith("interp-init"):
            for value in ("nan", "inf", "-inf", "1e300") + (("2.5",) if p.type.integer else ()):
                out.append((option, value))
    return out


@pytest.mark.parametrize(
    ("option", "value"), _script_numbers(), ids=[f"{o.split('/')[-1]}={v}" for o, v in _script_numbers()]
)
def test_every_scripts_number_refuses_nan_inf_and_out_of_bounds(
    option: str, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 56, class 1: nan, inf, -inf, a huge number (and a fraction for an integer) at any
    number option of any script: exit 2, the flag named, no traceback, nothing written."""
    from training.cli.errors import run_command

    monkeypatch.chdir(tmp_path)
    script, *sub, _name = option.split()
    command = _scripts()[script]
    param = _number_options()[option]
    flag = max(param.opts, key=len)
    assert run_command(command, [*sub, flag, value], script.split("/")[-1]) == 2
    err = capsys.readouterr().err
    assert (
        f"'{flag}'" in err
        and ("finite" in err or "out of bounds" in err or "is not an integer" in err)
        and "Traceback" not in err
    ), err
    assert list(tmp_path.iterdir()) == []
