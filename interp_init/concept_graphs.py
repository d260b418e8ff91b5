"""Concept-graph images (the journal's Fig. 6, after Okawa et al.): one object on a blank
background, rendered procedurally with numpy, and an exact rule-based reading of an image's concepts.

Three binary concepts, coded as the journal codes its tuples, digits in the order
**(shape, size, colour)**:

* shape: 0 circle, 1 triangle (an equilateral triangle, apex up);
* size: 0 large, 1 small (the object's *area*: a triangle has the area of the circle of its size);
* colour: 0 red (0.9, 0.1, 0.1), 1 blue (0.1, 0.1, 0.9) (the released code's RGB values).

So ``"000"`` is a large red circle and ``"010"`` a small red circle, as the journal's text
says ("an unseen tuple like 010 (representing a small red circle)"). The order is derived,
not chosen: the released code (``fig_code/fig6``) names its files by (shape, colour, size)
and its default experiment ``H32-fail1`` trains on 000, 100, 010, 111 and tests 001 and 011
in that order, which is the journal's training set 000, 100, 001, 111 and unseen 010, 011
with the last two digits swapped. The training tuples (:data:`TRAIN_CODES`) then have one
small object only, a blue triangle; the failure mode is drawing the unseen small objects
(:data:`UNSEEN_CODES`: small red circle, small blue circle) as triangles.

Each image is drawn on a white background at ``image_size`` pixels (28 or 32 for the CPU),
anti-aliased by ``supersample`` x ``supersample`` sub-pixels, with light jitter: the size
scaled by a factor uniform in ``1 +- size_jitter`` and the centre anywhere that keeps the
object ``margin`` pixels inside the frame. Image ``i`` of a tuple is drawn from
``numpy.random.default_rng([seed, tuple index, i])``, so it is the same whichever other tuples
or how many images are asked for.

:func:`read_concepts` reads an image back exactly: the object is the pixels whose coverage
(how far the darkest channel is from white, over the colours' 0.9) passes one half; colour by
the red and blue channel means over it; size by its pixel count against the geometric mean
of the two sizes' areas at the image's side (``large`` and ``small`` of the config); shape by
two measures of the object in its bounding box, each scaled to 0 at a circle's value and 1 at
an upright triangle's: the share of the box it fills (a circle pi/4, a triangle 1/2) and how far
its centroid lies below the box's centre, over the box's height (a circle 0, a triangle 1/6);
a triangle where the two scores sum past 1 (the nearer of the two shapes' points). The fill
alone confuses a few small triangles at 28 pixels, whose pixelated corners fill their box more.

An image shows **no object** (``read_concepts`` returns ``None``, which a judge counts wrong on
every concept) unless the pixels passing one half are one object of a size and form the
renders have (:func:`object_problem` says which test failed):

* at least :data:`MIN_AREA_SHARE` (one half) of the smallest render's area, a small circle
  shrunk by the full jitter (``pi (small (1 - size_jitter) side)^2``): a blank image, a faint
  smear with a few pixels past one half, or a speck is no object;
* at most :data:`MAX_AREA_FACTOR` (twice) the largest render's area, a large circle grown by
  the full jitter: a grey, dark or coloured field, or noise, covering the frame is no object
  (uncapped, such a field read as a large red circle: every pixel in, the box filled);
* its bounding box's longer side at most :data:`MAX_ASPECT` (twice) its shorter: a line or a
  streak is no object.

The thresholds come from the renders alone: their objects' pixel counts lie between 0.74 and
1.04 times those nominal areas and their boxes' sides within a factor 1.5 of each other at every
side from 16 to 64 pixels (1,600 renders a side measured; ``tests/interp_init/test_concept_graphs.py``
checks both on renders of every side), so every render keeps a margin of at least 1.3 on each test.

Example::

    >>> from interp_init.concept_graphs import Concepts, concept_graph_images, read_concepts
    >>> data = concept_graph_images(["000", "010"], per_code=2, seed=0)
    >>> data.images.shape, data.codes[2]
    (torch.Size([4, 3, 32, 32]), '010')
    >>> read_concepts(data.images[2].numpy()) == Concepts.from_code("010")
    True
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

#: Every tuple of the cube, in the journal's digit order (shape, size, colour).
ALL_CODES: tuple[str, ...] = tuple("".join(bits) for bits in itertools.product("01", repeat=3))
#: Okawa et al.'s sparse training subset, the journal's black nodes of Fig. 6A.
TRAIN_CODES: tuple[str, ...] = ("000", "100", "001", "111")
#: The two unseen tuples whose samples the journal's Fig. 6B shows.
UNSEEN_CODES: tuple[str, ...] = ("010", "011")
#: The values of each concept, index 0 then 1.
CONCEPT_VALUES: dict[str, tuple[str, str]] = {
    "shape": ("circle", "triangle"),
    "size": ("large", "small"),
    "colour": ("red", "blue"),
}
#: RGB of each colour value (the released code's).
COLOURS: tuple[tuple[float, float, float], tuple[float, float, float]] = ((0.9, 0.1, 0.1), (0.1, 0.1, 0.9))
_CIRCLE_FILL = math.pi / 4
_TRIANGLE_FILL = 0.5
#: How far below its bounding box's centre an upright triangle's centroid lies, over the box's height (2/3 - 1/2).
_TRIANGLE_DROP = 1 / 6
_EQUILATERAL_AREA = 3 * math.sqrt(3) / 4  # an equilateral triangle's area over its circumradius squared
#: An object covers at least this share of the smallest render's nominal area (the module docstring).
MIN_AREA_SHARE = 0.5
#: An object covers at most this many times the largest render's nominal area.
MAX_AREA_FACTOR = 2.0
#: An object's bounding box has its longer side at most this many times its shorter.
MAX_ASPECT = 2.0


class Concepts(NamedTuple):
    """One tuple of the concept cube: ``shape`` (0 circle, 1 triangle), ``size`` (0 large,
    1 small), ``colour`` (0 red, 1 blue); :attr:`code` is the journal's digits in this order."""

    shape: int
    size: int
    colour: int

    @classmethod
    def from_code(cls, code: str) -> Concepts:
        """The tuple of a code such as ``"010"`` (a small red circle)."""
        if not isinstance(code, str) or len(code) != 3 or set(code) - {"0", "1"}:
            raise ValueError(f"a concept code is three binary digits (shape, size, colour) such as '010', got {code!r}")
        return cls(*(int(c) for c in code))

    @property
    def code(self) -> str:
        """The journal's code, e.g. ``"010"``."""
        return f"{self.shape}{self.size}{self.colour}"

    def describe(self) -> str:
        """In words, e.g. ``"small red circle"``."""
        return " ".join(
            CONCEPT_VALUES[name][value]
            for name, value in zip(("size", "colour", "shape"), (self.size, self.colour, self.shape))
        )


@dataclass(frozen=True)
class ConceptGraphConfig:
    """How concept-graph images are rendered (the module docstring: the coding and the jitter).

    Args:
        image_size: the side in pixels (28 or 32 at CPU scale; 16 to 256).
        large, small: the radius of a large and a small circle as a fraction of the side; a
            triangle of a size has that circle's area.
        size_jitter: the size is scaled by a factor uniform in ``1 +- size_jitter`` (0 to 0.3).
        margin: pixels kept free between the object and the frame.
        supersample: sub-pixels per pixel side for anti-aliasing (1 to 8).
    """

    image_size: int = 32
    large: float = 0.28
    small: float = 0.16
    size_jitter: float = 0.08
    margin: int = 1
    supersample: int = 4

    def __post_init__(self) -> None:
        for name, low, high in (("image_size", 16, 256), ("margin", 0, 8), ("supersample", 1, 8)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
        for name in ("large", "small", "size_jitter"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if not 0 < self.small < self.large:
            raise ValueError(f"small must be a positive radius below large ({self.large}), got {self.small!r}")
        if not 0 <= self.size_jitter <= 0.3:
            raise ValueError(f"size_jitter must be in [0, 0.3], got {self.size_jitter!r}")
        room = self.image_size - 2 * self.margin
        if self._extent(self.large * (1 + self.size_jitter)) > room:
            raise ValueError(
                f"large ({self.large}) with size_jitter {self.size_jitter} does not fit a {self.image_size}-pixel image "
                f"with margin {self.margin}; use a smaller large"
            )

    def _extent(self, radius_fraction: float) -> float:
        """The widest extent in pixels of either shape at a radius (the triangle's width, sqrt(3) R)."""
        r = radius_fraction * self.image_size
        circumradius = r * math.sqrt(math.pi / _EQUILATERAL_AREA)
        return max(2 * r, math.sqrt(3) * circumradius)


def _coverage(concepts: Concepts, rng: np.random.Generator, config: ConceptGraphConfig) -> np.ndarray:
    """The share of each pixel the object covers, ``[H, W]`` in [0, 1]."""
    n = config.image_size
    r = (config.large if concepts.size == 0 else config.small) * n
    r *= rng.uniform(1 - config.size_jitter, 1 + config.size_jitter)
    circumradius = r * math.sqrt(math.pi / _EQUILATERAL_AREA)  # the triangle of the circle's area
    if concepts.shape == 0:
        half_w = half_top = half_bottom = r
    else:
        half_w, half_top, half_bottom = circumradius * math.sqrt(3) / 2, circumradius, circumradius / 2
    cx = rng.uniform(config.margin + half_w, n - config.margin - half_w)
    cy = rng.uniform(config.margin + half_top, n - config.margin - half_bottom)
    s = config.supersample
    ticks = (np.arange(n * s) + 0.5) / s
    y, x = np.meshgrid(ticks, ticks, indexing="ij")
    if concepts.shape == 0:
        inside = (x - cx) ** 2 + (y - cy) ** 2 <= r**2
    else:  # apex up (y grows downwards): below the two slanted sides, above the base
        base = cy + circumradius / 2
        apex = cy - circumradius
        height = base - apex
        half_width_at = (y - apex) / height * half_w
        inside = (y >= apex) & (y <= base) & (np.abs(x - cx) <= half_width_at)
    return inside.reshape(n, s, n, s).mean(axis=(1, 3))


def render_concepts(
    concepts: Concepts | str, rng: np.random.Generator, config: ConceptGraphConfig | None = None
) -> Float[np.ndarray, "3 h w"]:
    """One image of ``concepts`` (a :class:`Concepts` or a code), float32 RGB in [0, 1], channels
    first, its jitter drawn from ``rng``."""
    concepts = Concepts.from_code(concepts) if isinstance(concepts, str) else concepts
    config = config or ConceptGraphConfig()
    cover = _coverage(concepts, rng, config)
    colour = np.asarray(COLOURS[concepts.colour], dtype=np.float64)[:, None, None]
    return (1.0 - cover[None] * (1.0 - colour)).astype(np.float32)  # white where the object is not


@dataclass(frozen=True)
class ConceptImages:
    """Rendered images with their tuples: ``images [n, 3, H, W]`` in [0, 1], ``concepts
    [n, 3]`` (shape, size, colour). A ``torch.utils.data.Dataset``: item ``i`` is
    ``(images[i], concepts[i])``."""

    images: Float[Tensor, "n 3 h w"]
    concepts: Int[Tensor, "n 3"]

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        return self.images[index], self.concepts[index]

    @property
    def codes(self) -> list[str]:
        """Each image's code."""
        return ["".join(str(int(v)) for v in row) for row in self.concepts]


def concept_graph_images(
    codes: Sequence[str] = TRAIN_CODES, per_code: int = 1250, seed: int = 0, config: ConceptGraphConfig | None = None
) -> ConceptImages:
    """``per_code`` images of each code in ``codes`` (default: the training subset, 5,000 images
    as the released code), grouped by code in the given order, seeded (the module docstring)."""
    config = config or ConceptGraphConfig()
    if isinstance(codes, str):
        raise ValueError(f"codes must be a list of codes such as ['000', '100'], got the string {codes!r}")
    tuples = [Concepts.from_code(code) for code in codes]
    if not tuples or len(set(tuples)) != len(tuples):
        raise ValueError(f"codes must be distinct and at least one, got {list(codes)!r}")
    if isinstance(per_code, bool) or not isinstance(per_code, int) or per_code < 1:
        raise ValueError(f"per_code must be an integer >= 1, got {per_code!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    images = np.empty((len(tuples) * per_code, 3, config.image_size, config.image_size), dtype=np.float32)
    for t, concepts in enumerate(tuples):
        index = int(concepts.code, 2)
        for i in range(per_code):
            images[t * per_code + i] = render_concepts(concepts, np.random.default_rng([seed, index, i]), config)
    labels = torch.tensor([list(c) for c in tuples], dtype=torch.int64).repeat_interleave(per_code, dim=0)
    return ConceptImages(torch.from_numpy(images), labels)


def object_mask(image: Float[np.ndarray, "3 h w"]) -> np.ndarray:
    """The pixels the object covers more than half of, ``[H, W]`` bool (white background)."""
    image = np.asarray(image, dtype=np.float64)
    if image.ndim != 3 or image.shape[0] != 3:
        raise ValueError(f"an image is [3, H, W] RGB in [0, 1], got shape {image.shape}")
    coverage = (1.0 - image.min(axis=0)) / 0.9
    return coverage > 0.5


def _box(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows and the columns a non-empty mask touches."""
    return np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))


def object_problem(image: Float[np.ndarray, "3 h w"], config: ConceptGraphConfig | None = None) -> str | None:
    """Why ``image`` shows no object (the module docstring's three tests, at the image's side),
    in words; ``None`` when it shows one. ``config`` gives the sizes and jitter of the renders."""
    return _mask_problem(object_mask(image), config or ConceptGraphConfig())


def _mask_problem(mask: np.ndarray, config: ConceptGraphConfig) -> str | None:
    """:func:`object_problem` on an image's :func:`object_mask`."""
    area = int(mask.sum())
    side = mask.shape[-1]
    smallest = math.pi * (config.small * (1 - config.size_jitter) * side) ** 2
    largest = math.pi * (config.large * (1 + config.size_jitter) * side) ** 2
    if area < MIN_AREA_SHARE * smallest:
        return f"{area} pixel(s) past half covered, fewer than {MIN_AREA_SHARE * smallest:.1f} (half the smallest render's area)"
    if area > MAX_AREA_FACTOR * largest:
        return f"{area} pixels past half covered, more than {MAX_AREA_FACTOR * largest:.1f} (twice the largest render's area)"
    rows, cols = _box(mask)
    height, width = rows[-1] - rows[0] + 1, cols[-1] - cols[0] + 1
    if max(height, width) > MAX_ASPECT * min(height, width):
        return f"a {height} x {width} pixel box, one side more than {MAX_ASPECT:g} times the other"
    return None


def read_concepts(image: Float[np.ndarray, "3 h w"], config: ConceptGraphConfig | None = None) -> Concepts | None:
    """The concepts an image shows, read by rule (the module docstring); ``None`` where it shows
    no object (:func:`object_problem`: blank, a speck or faint smear, a field or noise filling
    the frame, a streak), which is wrong on every concept."""
    config = config or ConceptGraphConfig()
    image = np.asarray(image, dtype=np.float64)
    mask = object_mask(image)
    if _mask_problem(mask, config) is not None:
        return None
    area = int(mask.sum())
    colour = int(image[2][mask].mean() > image[0][mask].mean())
    side = image.shape[-1]
    size = int(area < math.pi * config.large * config.small * side**2)  # the geometric mean of the two areas
    rows, cols = _box(mask)
    height = rows[-1] - rows[0] + 1
    fill = area / (height * (cols[-1] - cols[0] + 1))
    drop = (np.nonzero(mask)[0].mean() - (rows[0] + rows[-1]) / 2) / height
    # 0 at a circle's value, 1 at a triangle's, for each of the two measures
    fill_score = (_CIRCLE_FILL - fill) / (_CIRCLE_FILL - _TRIANGLE_FILL)
    drop_score = drop / _TRIANGLE_DROP
    shape = int(fill_score + drop_score > 1)  # the nearer of the two shapes' points
    return Concepts(shape, size, colour)
