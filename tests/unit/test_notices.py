"""builder/notices.py: a warning from code that holds no Reporter reaches the running command's
Reporter live (the one output channel); without one it is a BuildNotice warning; traces only
show with -v."""

from __future__ import annotations

import io
import warnings

import pytest

from builder.report import Reporter
from kbuild_common.notices import BuildNotice, notice, reporting, trace


def reporter(verbose: bool) -> tuple[Reporter, io.StringIO]:
    stream = io.StringIO()
    r = Reporter(verbose=verbose, plain=True, stream=stream)
    r.err = r.console  # warnings and info on the one captured stream
    return r, stream


def test_a_notice_goes_to_the_installed_reporter_and_is_no_python_warning():
    r, stream = reporter(verbose=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a Python warning here would raise
        with reporting(r):
            notice("edition 4 manifest")
    assert stream.getvalue() == "kbuild: warning: edition 4 manifest\n"


def test_without_a_reporter_a_notice_is_a_build_notice_warning():
    with pytest.warns(BuildNotice, match="edition 4 manifest"):
        notice("edition 4 manifest")


def test_traces_show_only_on_a_verbose_reporter_and_never_without_one():
    quiet, quiet_out = reporter(verbose=False)
    loud, loud_out = reporter(verbose=True)
    with reporting(quiet):
        trace("$ nvcc -c a.cu")
    with reporting(loud):
        trace("$ nvcc -c a.cu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace("$ nvcc -c a.cu")  # no reporter: dropped, not a warning
    assert quiet_out.getvalue() == ""
    assert loud_out.getvalue() == "$ nvcc -c a.cu\n"


def test_the_reporter_is_uninstalled_after_the_block_even_on_error():
    r, stream = reporter(verbose=False)
    with pytest.raises(RuntimeError), reporting(r):
        raise RuntimeError("x")
    with pytest.warns(BuildNotice):
        notice("after")
    assert stream.getvalue() == ""
