import pytest

from mobiperf.core.errors import StackError, UsageError
from mobiperf.stack.emulated import EmulatedStack
from mobiperf.stack.options import StackOptions
from mobiperf.stack.spec import parse_stack_spec
from mobiperf.target.target import Target
from mobiperf.target.transport import Completed, LocalTransport


def test_filesystem_alone():
    spec = parse_stack_spec("ext4")
    assert spec.filesystem.name == "ext4" and spec.layers == ()
    assert str(spec) == "ext4"


def test_layers_and_options_round_trip():
    spec = parse_stack_spec("xfs+bfuse:io_unit=512k,buffer=8M")
    assert spec.filesystem.name == "xfs"
    assert spec.layers[0].name == "bfuse"
    assert spec.layers[0].options == {"io_unit": "512k", "buffer": "8M"}
    assert str(spec) == "xfs+bfuse:io_unit=512k,buffer=8M"


@pytest.mark.parametrize("text,message", [
    ("", "empty stack spec"),
    ("ntfs", "choose one of ext4, xfs, btrfs"),
    ("ext4+nfs", "unknown layer 'nfs'"),
    ("ext4+bfuse:io_unit", "is not key=value"),
    ("ext4+fuse+bfuse", "at most one FUSE layer"),
])
def test_bad_specs_say_what_is_valid(text, message):
    with pytest.raises(UsageError, match=message):
        parse_stack_spec(text)


class NotRoot(LocalTransport):
    """The device boundary faked: a target where we are an ordinary user."""

    def run(self, argv, **kw):
        if list(argv) == ["id", "-u"]:
            return Completed(tuple(argv), 0, b"1000\n", b"")
        raise AssertionError(f"nothing else may run without root: {argv}")


def test_no_root_says_what_is_needed():
    with pytest.raises(StackError, match="needs root.*loop device.*mkfs.*mount"):
        with EmulatedStack(Target(NotRoot()), parse_stack_spec("ext4")):
            pass


def test_unknown_scheduler_is_a_usage_error():
    with pytest.raises(UsageError, match="mq-deadline"):
        EmulatedStack(Target(LocalTransport()), parse_stack_spec("ext4"), StackOptions(scheduler="cfq"))
