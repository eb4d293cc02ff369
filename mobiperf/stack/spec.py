"""What a stack is, as a string: bottom layer first, parsed into a StackSpec.

    ext4                              the data partition alone
    raw                               no filesystem: the bare loop device (the paper's raw-device bars); the
                                      workload gets its path in $MOBIPERF_DEVICE
    ext4:data=journal                 ext4 with another journal mode (ordered, the default; journal; writeback)
    ext4+fuse                         /sdcard over /data/media the legacy Android way (4 KiB FUSE IO unit)
    dir:/data/local/tmp               a directory of the target's own storage, used as it is (phones)
    dir:/data/local/tmp/mp+bfuse      the bundled bFUSE daemon mounted over that directory (mobiperf.stack.directory)
    ext4+bfuse:io_unit=512k           the Buffered FUSE daemon with options
    xfs+fjord:preset=fjord-ram,whitelist=cache

The first element is a filesystem, the others are layers mounted on top, each a reference daemon (the names are
mobiperf.core.vocabulary's). Filesystem options: `mkfs=ARGS` (extra mkfs arguments, space-separated), `mount=OPTS`
(replaces the Android-like mount options; separate them with `;`, since `,` separates the layer's options), for
ext4 `data=ordered|journal|writeback` (the journal mode in the Android-like options), and for ext4
`journal_dev=SIZE` (the journal on a second loop device, seed 002's external journal).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mobiperf.core.errors import UsageError
from mobiperf.core.units import parse_size
from mobiperf.core.vocabulary import EXT4_DATA_MODES, FUSE_LAYERS, RAW

MKFS = {
    # filesystem: (mkfs argv prefix, Android-like mount options); every filesystem of the vocabulary but raw
    # (tests/unit/test_vocabulary.py holds them equal)
    # lazy_itable_init=0 keeps ext4lazyinit from writing inode tables in the background of a traced run.
    "ext4": (["mkfs.ext4", "-q", "-F", "-b", "4096", "-E", "lazy_itable_init=0,lazy_journal_init=0"],
             "rw,nosuid,nodev,noatime,data=ordered,barrier=1"),
    "xfs": (["mkfs.xfs", "-q", "-f"], "rw,nosuid,nodev,noatime"),
    "btrfs": (["mkfs.btrfs", "-q", "-f"], "rw,nosuid,nodev,noatime"),
    "f2fs": (["mkfs.f2fs", "-q", "-f"], "rw,nosuid,nodev,noatime"),
}
DEFAULT_IMAGE_SIZE = 1 << 30


@dataclass(frozen=True)
class Layer:
    name: str
    options: dict[str, str] = field(default_factory=dict)

    def spec(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in self.options.items())
        return f"{self.name}:{opts}" if opts else self.name


@dataclass(frozen=True)
class StackSpec:
    filesystem: Layer
    layers: tuple[Layer, ...] = ()

    def __str__(self) -> str:
        bottom = (f"dir:{self.filesystem.options['path']}" if self.filesystem.name == "dir"
                  else self.filesystem.spec())
        return "+".join([bottom, *(layer.spec() for layer in self.layers)])


def parse_stack_spec(text: str) -> StackSpec:
    """StackSpec of `fs[:k=v,...][+layer[:k=v,...]]...` or `dir:PATH[+layer[:k=v,...]]`; UsageError naming the
    valid choices."""
    if text.startswith("dir:"):
        path, plus, upper = text[4:].partition("+")
        layers = [_parse_layer(p.strip(), text) for p in upper.split("+")] if plus else []
        return check_stack(StackSpec(Layer("dir", {"path": path}), tuple(layers)), text)
    parts = [p.strip() for p in text.split("+")]
    if not parts or not parts[0]:
        raise UsageError(f"empty stack spec {text!r} (examples: ext4, ext4+fuse, ext4+bfuse:io_unit=512k)")
    layers = [_parse_layer(p, text) for p in parts]
    return check_stack(StackSpec(layers[0], tuple(layers[1:])), text)


def check_stack(spec: StackSpec, shown: str | None = None) -> StackSpec:
    """The spec, when it names a stack mobiperf can build (from a string, or typed, as in a run request file);
    UsageError naming the valid choices, quoting the stack as `shown` (default: as the spec spells it)."""
    text = shown if shown is not None else str(spec)
    fs, upper = spec.filesystem, list(spec.layers)
    if fs.name == "dir":
        if not fs.options.get("path", "").startswith("/"):
            raise UsageError(f"stack {text!r}: dir: takes an absolute path on the target (e.g. dir:/data/local/tmp)")
    elif fs.name == RAW:
        if upper or fs.options:
            raise UsageError(f"stack {text!r}: raw is the bare device: no options, no layers over it")
    elif fs.name not in MKFS:
        raise UsageError(f"stack {text!r}: {fs.name!r} is not a filesystem; choose one of "
                         f"{', '.join(MKFS)} (or raw, the bare device)")
    elif "data" in fs.options and (fs.name != "ext4" or fs.options["data"] not in EXT4_DATA_MODES):
        raise UsageError(f"stack {text!r}: data= is ext4's journal mode: {', '.join(EXT4_DATA_MODES)}")
    _check_fuse_layers(upper, text)
    return spec


def _check_fuse_layers(layers: list[Layer], whole: str) -> None:
    for layer in layers:
        if layer.name not in FUSE_LAYERS:
            raise UsageError(f"stack {whole!r}: unknown layer {layer.name!r}; layers are {', '.join(FUSE_LAYERS)}")
    if len(layers) > 1:
        raise UsageError(f"stack {whole!r}: at most one FUSE layer over the filesystem")


def _parse_layer(part: str, whole: str) -> Layer:
    name, _, opts = part.partition(":")
    options: dict[str, str] = {}
    for item in filter(None, opts.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"stack {whole!r}: option {item!r} of {name!r} is not key=value")
        options[key.strip()] = value.strip()
    return Layer(name.strip(), options)


def parse_image_size(text: str) -> int:
    size = parse_size(text)
    if size < 64 << 20:
        raise UsageError(f"image size {text} is too small; the stack needs at least 64M")
    return size
