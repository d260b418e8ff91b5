"""The base of the toolkit: gamma-scaled initialization, the architectures, the
anchor-function tasks and the run folder.

What a researcher calls (each documented on its module's page; everything else stays
importable from its module, e.g. :func:`interp_init.model.save_weights` or
:class:`interp_init.tasks.base.RunMetrics`):

* a model: :class:`ModelConfig` and :class:`InitConfig` (the papers' defaults),
  :func:`build_model` (one of the registered architectures, :func:`architecture_names`:
  ``standard``, ``journal``, ``neurips``; :mod:`interp_init.architectures` registers your
  own), :func:`resolve_device`;
* gamma init of any ``HookedTransformer``: :func:`gamma_init_` (std = d_in ** -gamma) and
  :func:`init_stds` (the std each weight gets);
* gamma init of any other ``torch.nn.Module`` (a CNN, an MLP, a diffusion U-Net, an
  ``nn.Transformer``): :func:`gamma_init_module_` (scale = fan_in ** -gamma, normal or
  uniform, each layer type's fan-in stated), :class:`ModuleInitConfig` and
  :func:`module_init_plan` (each parameter's fan-in and scale);
* the journal's concept-graph images (Fig. 6): :func:`concept_graph_images` (seeded renders of
  each tuple, a ``torch`` dataset), :class:`Concepts` (the journal's coding), :class:`ConceptGraphConfig`
  and :func:`read_concepts` (an exact rule-based reading of an image's concepts); the model
  trained on them: :class:`ConceptUNet` (the released conditional context U-Net, its shape a
  :class:`UNetConfig`), :class:`DDPMSchedule`, :func:`ddpm_loss` and :func:`ddpm_sample`
  (docs/concept-graphs.md);
* a trained run: :func:`load_model` (the model of a run folder, identical logits);
* trained models shipped with the package (:mod:`interp_init.pretrained`): :func:`from_pretrained`
  (a ``HookedTransformer`` in one line, offline, its files checked against their SHA-256),
  :func:`list_pretrained` (their names) and :func:`pretrained_info` (task, init, seed, config, metrics);
* tasks: :func:`make_task` and :func:`registered_tasks`; your own task is a :class:`Task`
  subclass with a :class:`TaskMetrics` dataclass, returning :class:`Samples`, named by its
  import path or registered with :func:`register_task` (docs/tasks.md);
* :func:`quiet_deprecation`: TransformerLens' deprecation warnings silenced, for scripts.

Modules: :mod:`interp_init.config`, :mod:`interp_init.architectures`, :mod:`interp_init.init`,
:mod:`interp_init.module_init`, :mod:`interp_init.concept_graphs`, :mod:`interp_init.diffusion`,
:mod:`interp_init.model`, :mod:`interp_init.runfolder` (a run's folder), :mod:`interp_init.pretrained` (the shipped models), the tasks
(:mod:`interp_init.tasks.base`: what a task is and typed ``metrics.json``;
:mod:`interp_init.tasks.registry`; :mod:`interp_init.tasks.anchor_pairs` and
:mod:`interp_init.tasks.anchor`, the anchor-function tasks, whose samples
:mod:`interp_init.tasks.data` draws; :mod:`interp_init.tasks.addition`).

``__version__`` is the installed package's version, from its metadata.  The names below
are imported on first use (PEP 562 ``__getattr__``, :mod:`interp_init.lazy`): the configs
and the task definitions (``interp_init.config``, ``interp_init.tasks.anchor_pairs``) import
neither torch nor TransformerLens, so the command line's ``--help`` stays fast.
"""

from __future__ import annotations

import warnings
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType

from interp_init.lazy import lazy_attributes

# tqdm.auto (which TransformerLens and the training loop import) warns "IProgress not found" in a
# Jupyter kernel without ipywidgets, then draws text bars anyway: a red box in every notebook, for nothing.
warnings.filterwarnings("ignore", message="IProgress not found", category=Warning)

try:
    #: The installed distribution's version (``interp-init --version`` prints the same).
    __version__ = version("interp-init")
except PackageNotFoundError:  # a source tree that was never installed (pip install -e . installs it)
    __version__ = "0+unknown"

_ARCHITECTURES = ("architecture_names",)
_CONCEPT_GRAPHS = ("ConceptGraphConfig", "Concepts", "concept_graph_images", "read_concepts")
_CONFIG = ("InitConfig", "ModelConfig")
_DIFFUSION = ("ConceptUNet", "DDPMSchedule", "UNetConfig", "ddpm_loss", "ddpm_sample")
_INIT = ("gamma_init_", "init_stds")
_MODULE_INIT = ("ModuleInitConfig", "gamma_init_module_", "module_init_plan")
_MODEL = ("build_model", "quiet_deprecation", "resolve_device")
_PRETRAINED = ("from_pretrained", "list_pretrained", "pretrained_info")
_RUNFOLDER = ("load_model",)
_TASK = ("Samples", "Task", "TaskMetrics")
_TASK_REGISTRY = ("make_task", "register_task", "registered_tasks")

__all__ = sorted(
    (
        *_ARCHITECTURES,
        *_CONCEPT_GRAPHS,
        *_CONFIG,
        *_DIFFUSION,
        *_INIT,
        *_MODULE_INIT,
        *_MODEL,
        *_PRETRAINED,
        *_RUNFOLDER,
        *_TASK,
        *_TASK_REGISTRY,
    )
)


def _module_of(name: str) -> ModuleType:
    if name in _ARCHITECTURES:
        from interp_init import architectures as module
    elif name in _CONCEPT_GRAPHS:
        from interp_init import concept_graphs as module
    elif name in _CONFIG:
        from interp_init import config as module
    elif name in _DIFFUSION:
        from interp_init import diffusion as module
    elif name in _INIT:
        from interp_init import init as module
    elif name in _MODULE_INIT:
        from interp_init import module_init as module
    elif name in _MODEL:
        from interp_init import model as module
    elif name in _PRETRAINED:
        from interp_init import pretrained as module
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
