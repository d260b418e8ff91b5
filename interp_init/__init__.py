"""The base of the toolkit: gamma-scaled initialization, the architectures, the
anchor-function tasks and the run folder.

``gamma_init_`` re-initializes any ``HookedTransformer`` with std = d_in ** -gamma;
the architectures (built in: ``standard``, ``journal``, ``neurips``) are registered
:class:`Architecture` objects (:mod:`interp_init.architectures`), built by name; ``build_model`` makes one from a :class:`ModelConfig` and an :class:`InitConfig`;
a task is one class registered by name (:mod:`interp_init.tasks.base`: ``Task``, typed
``metrics.json`` with ``read_run_metrics``; :mod:`interp_init.tasks.registry`: ``make_task``,
``register_task``);
:mod:`interp_init.tasks.anchor_pairs` defines the anchor-function tasks and :mod:`interp_init.data` draws
their samples, :mod:`interp_init.tasks.anchor` and :mod:`interp_init.tasks.addition` make them tasks; :class:`~interp_init.runfolder.RunFolder` owns a run's folder and
``load_model`` returns its trained model.

``__version__`` is the installed package's version, from its metadata.  The names below
are imported on first use (PEP 562 ``__getattr__``): the configs and the task definitions
(``interp_init.config``, ``interp_init.tasks.anchor_pairs``) import neither torch nor TransformerLens, so
the command line's ``--help`` stays fast.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from types import ModuleType

from interp_init.lazy import lazy_attributes

try:
    #: The installed distribution's version (``interp-init --version`` prints the same).
    __version__ = version("interp-init")
except PackageNotFoundError:  # a source tree that was never installed (pip install -e . installs it)
    __version__ = "0+unknown"

_ARCHITECTURES = ("Architecture", "JournalBlock", "PostLNBlock", "architecture_names", "architecture_of", "get_architecture", "register_architecture")
_CONFIG = ("CONVENTIONS", "InitConfig", "ModelConfig")
_INIT = ("bias_bounds", "gamma_init_", "init_stds")
_MODEL = ("build_model", "empty_model", "load_weights", "quiet_deprecation", "resolve_device", "save_weights")
_RUNFOLDER = ("load_model",)
_TASK = ("EpochRecord", "RunMetrics", "Samples", "Task", "TaskMetrics", "read_run_metrics")
_TASK_REGISTRY = ("make_task", "register_task", "registered_tasks")

__all__ = sorted((*_ARCHITECTURES, *_CONFIG, *_INIT, *_MODEL, *_RUNFOLDER, *_TASK, *_TASK_REGISTRY))


def _module_of(name: str) -> ModuleType:
    if name in _ARCHITECTURES:
        from interp_init import architectures as module
    elif name in _CONFIG:
        from interp_init import config as module
    elif name in _INIT:
        from interp_init import init as module
    elif name in _MODEL:
        from interp_init import model as module
    elif name in _RUNFOLDER:
        from interp_init import runfolder as module
    elif name in _TASK:
        import interp_init.tasks.base as module
    elif name in _TASK_REGISTRY:
        import interp_init.tasks.registry as module
    else:
        raise AttributeError(f"module 'interp_init' has no attribute {name!r}")
    return module


__getattr__, __dir__ = lazy_attributes(globals(), _module_of, __all__)
