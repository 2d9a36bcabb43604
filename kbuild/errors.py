"""Every failure of kernel loading, under one root: `except kbuild.KernelError` catches them all.

Each class also keeps the built-in base the runtime raised before it had these classes, so a
caller that catches `FileNotFoundError` (no variant fits), `OSError` (the hub is down) or
`ValueError` (a bad pin) still works. Errors the runtime only passes on (a kernel's own import
failing, a disk that is full) are not wrapped.

Imports nothing of kbuild: every module may import it.
"""

from __future__ import annotations


class KernelError(Exception):
    """Root: a kernel could not be found, fetched, verified or imported."""


# -- what was asked for is not there (FileNotFoundError) -------------------------------------------

class KernelNotFound(KernelError, FileNotFoundError):
    """No kernel, variant or file where the request points (a folder, a repo at a commit)."""


class RepoNotFound(KernelNotFound):
    """The hub has no such repo."""


class NoVariantFits(KernelNotFound):
    """Variants are there, but none of them runs on this system (the message says why each not)."""


class OfflineMiss(KernelNotFound):
    """Offline, and what was asked for is not in the cache."""


class LockFileNotFound(KernelNotFound):
    """No kernels.lock where it was looked for, or it cannot be read."""


# -- the request or the environment is wrong (ValueError) -------------------------------------------

class InvalidRequest(KernelError, ValueError):
    """A request kbuild cannot act on: a repo id, pin, version, backend, hub address or mapping."""


class MissingPin(InvalidRequest):
    """A request named no version, branch, tag or commit."""

    def __init__(self, repo_id: str, message: str):
        super().__init__(message)
        self.repo_id = repo_id


class RevisionNotFound(KernelError, ValueError):
    """The repo has no such version, branch, tag or commit."""


class InvalidSetting(KernelError, ValueError):
    """An environment variable or config file the runtime reads is malformed (LOCAL_KERNELS, KBUILD_GPU_ARCH)."""


class UntrustedKernel(KernelError, ValueError):
    """The kernel's organisation is not trusted on that hub, and trust_remote_code was not given."""


class InvalidLockFile(KernelError, ValueError):
    """A kernels.lock that is malformed, or that does not lock the kernel asked for."""


class InvalidLayer(KernelError, TypeError):
    """A kernel's layer cannot replace the module it is mapped to: it keeps state of its own, or its
    forward takes other arguments (a TypeError, as Hugging Face's kernels raises it)."""


# -- what was found cannot be trusted (ValueError) --------------------------------------------------

class IntegrityError(KernelError, ValueError):
    """A variant's files do not match the digest its metadata.json records (or the hub's listing)."""


class SignatureRefused(IntegrityError):
    """A signature rule refused a variant: unsigned, not a good signature of its metadata.json, or
    made by a signer the organisation's trusted signers do not list (the message names the signer
    when there is one, the rule and where it was set)."""


class InvalidMetadata(KernelError, ValueError):
    """A variant's metadata.json is not valid JSON or has a field of the wrong shape."""


class BadHubContent(KernelError, ValueError):
    """The hub answered with something kbuild refuses to write or believe: a path that would
    escape the cache, a link in a variant, a listing outside the folder asked for."""


# -- the hub failed (OSError) ----------------------------------------------------------------------

class HubRequestFailed(KernelError, OSError):
    """The hub answered a request with an error."""


class HubUnreachable(HubRequestFailed):
    """The hub could not be asked (no connection, a server error, a missing hub folder)."""


class HubAccessDenied(HubRequestFailed, PermissionError):
    """The hub refused the request (401/403): a token is missing or lacks access."""


class OversizedDownload(HubRequestFailed):
    """The hub sent more bytes than it listed for the file."""


class VariantTooLarge(OversizedDownload):
    """A variant's download is over its size budget: its listing claims more than
    KBUILD_MAX_VARIANT_BYTES allows, or the hub sent more than the listing's total."""


# -- the cache cannot be written (PermissionError, an OSError) --------------------------------------

class CacheNotWritable(KernelError, PermissionError):
    """The kernel cache (KBUILD_CACHE) is read-only or not this user's, and what was asked for is not in it."""


class GitFailed(KernelError, RuntimeError):
    """git exited non-zero reading a local hub (the builder's runner raises its CommandError)."""


# -- the variant could not be imported (ImportError) -----------------------------------------------

class KernelImportError(KernelError, ImportError):
    """A variant cannot be imported: its module name is taken, or its kernel dependencies fail."""


class TorchMissing(KernelError, ModuleNotFoundError):
    """This Python has no torch, which every kernel is loaded into."""


class HubClientMissing(KernelError, ModuleNotFoundError):
    """An HTTP hub was asked for and this Python lacks huggingface_hub, kbuild's `hub` extra."""
